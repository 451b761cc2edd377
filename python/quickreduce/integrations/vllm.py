"""vLLM general plugin: installs quickreduce as vLLM's quick all-reduce
communicator (the `qr_comm` slot of CudaCommunicator), on NVIDIA too, where
vLLM builds its own only on ROCm.

Entry point (the wheel declares it): vllm.general_plugins: quickreduce =
quickreduce.integrations.vllm:register. vLLM calls register() in every process
that loads plugins. The policy is _policy.py's: opt-in (QR_VLLM=1 or
VLLM_PLUGINS naming quickreduce), --disable-custom-all-reduce honoured unless
QR_VLLM=1, vLLM's VLLM_ROCM_QUICK_REDUCE_* and AITER's variables read with
their meaning (_aliases.py).

For tensor-parallel groups (unique_name "tp:...") of 2, 4 or 8 ranks, after
CudaCommunicator.__init__, the slot gets a QuickReduceBackend (replacing
vLLM's ROCm QuickAllReduce unless QR_VLLM_KEEP_NATIVE=1), and vLLM's
"Using [...] all-reduce backends" line is issued again so that it names
QUICK_REDUCE. CudaCommunicator.all_reduce asks qr_comm first (after NCCL
symmetric memory where that is on) inside torch.ops.vllm.all_reduce, so the
choice is made at run time under torch.compile and CUDA graphs. destroy()
closes quickreduce's group; suspend()/resume() and checkpoint_prepare()/
checkpoint_restore() leave it and join again. A warning through vLLM's logger
names the compilation passes that send TP all-reduces around qr_comm and
that quickreduce does not serve: sequence parallelism's reduce-scatter /
all-gather run through quickreduce (_rsag.py), and so do FlashInfer's fused
all-reduce + residual + RMSNorm calls it takes (_flashinfer.py).

Written against vllm-project/vllm vllm/distributed/device_communicators/
cuda_communicator.py (the newest stored copy, upstream sha256 102d95c6...,
index id 71111748962; the constructor, all_reduce's order, destroy, suspend,
resume and checkpoint_* are unchanged in substance since 089eca13) and
vllm/plugins/__init__.py @01425553; guarded so that a vLLM without these names
gets a warning, not an error.
"""

import logging

from .. import stack_info
from . import _aliases, _flashinfer, _policy, _rsag
from ._backend import WORLD_SIZES, QuickReduceBackend, backend_of, wrap_method

_MODULE = "vllm.distributed.device_communicators.cuda_communicator"
_installed = False



def logger():
    """vLLM's logger for quickreduce's lines (a child of "vllm", so vLLM's
    handlers print them), else the package's."""
    try:
        from vllm.logger import init_logger
        return init_logger("vllm.quickreduce")
    except Exception:
        return logging.getLogger("quickreduce")


def enabled():
    return _policy.enabled("vllm")


def _is_tp(unique_name):
    return str(unique_name).split(":")[0] == "tp"


def active_bypasses():
    """The vLLM passes of the current configuration that send TP all-reduces
    around qr_comm (stack_info's names; older releases' names read too)."""
    try:
        import vllm.config as config
        get = getattr(config, "get_current_vllm_config_or_none", None) or \
            config.get_current_vllm_config
        pass_config = get().compilation_config.pass_config
    except Exception:
        return set()
    return set(stack_info.active("vllm", pass_config))


def _after_init(self, _result, args, kwargs):
    log = logger()
    name = getattr(self, "unique_name", "")
    if not _is_tp(name) or getattr(self, "world_size", None) not in WORLD_SIZES:
        return
    # vLLM sets use_custom_allreduce from _ENABLE_CUSTOM_ALL_REDUCE for TP
    # groups (False under --disable-custom-all-reduce).
    if not _policy.admit("vllm", not getattr(self, "use_custom_allreduce", True),
                         "--disable-custom-all-reduce", log.info):
        log.info("quickreduce: not installed into %s: vLLM's custom all-reduce is disabled "
                 "(set QR_VLLM=1 to install it anyway)", name)
        return
    native = getattr(self, "qr_comm", None)
    if native is not None and not getattr(native, "disabled", True) and \
            _policy.keep_native("vllm"):
        return
    stateless = kwargs.get("tcp_store_group")
    ranks = getattr(self, "ranks", None)
    backend = QuickReduceBackend(
        stateless if stateless is not None else self.cpu_group, self.device,
        label="vllm-" + name.replace(":", "-"),
        rank=getattr(self, "rank_in_group", None), world_size=self.world_size,
        src=ranks[0] if ranks else None, batch_invariant=_policy.batch_invariant("vllm"),
        log=log)
    if backend.disabled:
        return
    if native is not None and hasattr(native, "close"):
        native.close()
    self.qr_comm = backend
    relog = getattr(self, "_log_all_reduce_backend_selection", None)
    if relog is not None:
        relog()
    else:
        log.info("quickreduce serves the all-reduces of group '%s' that vLLM routes to its "
                 "quick all-reduce", name)
    active = active_bypasses()
    # Sequence parallelism's reduce-scatter / all-gather (_rsag.py) and
    # FlashInfer's fused all-reduce + RMSNorm (_flashinfer.py) now run
    # through this backend where it takes them: those paths leave the warning.
    if _rsag.install(type(self)) and _rsag.supported(backend):
        _policy.serve_path("vllm", "enable_sp")
    _flashinfer.set_backend("vllm", backend)
    if "fuse_allreduce_rms" in active and _flashinfer.arm("vllm", _flashinfer.VLLM_MODULES):
        _policy.serve_path("vllm", "fuse_allreduce_rms")
    _policy.warn_bypass_once("vllm", active, log.warning)


def _close(self, *_):
    b = backend_of(self)
    if b is not None:
        if _flashinfer._backends.get("vllm") is b:
            _flashinfer.set_backend("vllm", None)
        b.close()
        self.qr_comm = None


def _suspend(self, *_):
    b = backend_of(self)
    if b is not None:
        b.suspend()


def _resume(self, *_):
    b = backend_of(self)
    if b is not None:
        b.resume()


def install(cuda_communicator_class):
    """Wraps the class's __init__ and lifecycle methods (idempotent)."""
    log = logger()
    wrap_method(cuda_communicator_class, "__init__", _after_init, log)
    wrap_method(cuda_communicator_class, "destroy", _close, log)
    # Sleep mode and RL weight sync (suspend/resume) and CUDA checkpoints
    # (IPC mappings do not survive one): leave the group, join again.
    for method, hook in (("suspend", _suspend), ("resume", _resume),
                         ("checkpoint_prepare", _suspend), ("checkpoint_restore", _resume)):
        wrap_method(cuda_communicator_class, method, hook, log)


def register():
    """The vllm.general_plugins entry point."""
    global _installed
    if _installed or not enabled():
        return
    log = logger()
    try:
        _aliases.apply("vllm", log=log.info)
    except _aliases.AliasError as e:
        log.warning("quickreduce: %s", e)
        return
    try:
        import importlib
        mod = importlib.import_module(_MODULE)
        cls = getattr(mod, "CudaCommunicator")
    except Exception as e:
        log.warning("quickreduce: vLLM's CudaCommunicator not found (%s); plugin inactive", e)
        return
    install(cls)
    _installed = True
