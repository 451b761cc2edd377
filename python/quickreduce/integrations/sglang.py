"""SGLang adapter: installs quickreduce into GroupCoordinator's `qr_comm`
slot (the "qr" all-reduce method), on NVIDIA too, where SGLang builds its own
only on ROCm.

Two ways in, one policy (_policy.py: opt-in with QR_SGLANG=1 or SGLANG_PLUGINS
naming quickreduce; use_custom_allreduce=False honoured unless QR_SGLANG=1):
- SGLang's plugin system: the wheel declares the `sglang.srt.plugins` entry
  point quickreduce = quickreduce.integrations.sglang:register, which
  registers AFTER hooks on GroupCoordinator.__init__ and .destroy with
  SGLang's HookRegistry (load_plugins() runs it in every process).
- SGLang without a plugin system: the wheel's .pth file arms an import hook
  in every interpreter when QR_SGLANG=1; the moment
  sglang.srt.distributed.parallel_state is imported, patch() wraps the same
  two methods. The hook stands down where the plugin system will do it.

SGLang's ROCM_QUICK_REDUCE_* and AITER's AITER_QUICK_REDUCE_* variables are
read with their meaning (_aliases.py: MAX_SIZE_BYTES_MB=0 is 2 GB). On CUDA,
SGLang asks its custom all-reduce before "qr"; QR_SGLANG_FIRST=1 makes custom
all-reduce decline what quickreduce takes. Only groups whose unique_name
starts with "tp" get quickreduce (DP attention's "attention_tp" runs with
custom all-reduce off and is left alone).

Written against sgl-project/sglang python/sglang/srt/distributed/
parallel_state.py @0005973a (GroupCoordinator: constructor, all_reduce,
_resolve_outplace_all_reduce_method, graph_capture, destroy),
python/sglang/srt/plugins/__init__.py @0298b5b4 and plugins/hook_registry.py
@106f37ce (HookRegistry.register(target, hook, HookType.AFTER): hook(result,
*args, **kwargs)).
"""

import importlib
import importlib.util
import logging
import os
import sys

from .. import stack_info
from . import _aliases, _flashinfer, _policy, _rsag
from ._import_hook import AfterImportHook
from ._backend import WORLD_SIZES, QuickReduceBackend, backend_of, wrap_method

MODULE = "sglang.srt.distributed.parallel_state"
PLUGIN_GROUP = "sglang.srt.plugins"
_registered = False


def logger():
    """A child of SGLang's "sglang" logger, so SGLang's handlers print it."""
    return logging.getLogger("sglang.srt.distributed.quickreduce")


def enabled():
    return _policy.enabled("sglang")


def active_bypasses(coordinator):
    """The SGLang settings that send this group's all-reduces around "qr"
    (stack_info's names), symmetric memory as the group itself reports it."""
    try:
        from sglang.srt.server_args import get_global_server_args
        args = get_global_server_args()
    except Exception:
        args = None
    symm = getattr(coordinator, "is_symmetric_memory_enabled", None)
    symm_on = symm() if callable(symm) else bool(getattr(args, "enable_symm_mem", False))
    settings = {"enable_flashinfer_allreduce_fusion":
                bool(getattr(args, "enable_flashinfer_allreduce_fusion", False)),
                "enable_symm_mem": bool(symm_on)}
    return set(stack_info.active("sglang", settings, os.environ))


def _after_init(self, *_):
    log = logger()
    name = str(getattr(self, "unique_name", ""))
    if not name.startswith("tp") or getattr(self, "world_size", None) not in WORLD_SIZES:
        return
    if not _policy.admit("sglang", not getattr(self, "use_custom_allreduce", True),
                         "use_custom_allreduce=False (--disable-custom-all-reduce)", log.info):
        log.info("quickreduce: not installed into %s: SGLang's custom all-reduce is disabled "
                 "(set QR_SGLANG=1 to install it anyway)", name)
        return
    native = getattr(self, "qr_comm", None)
    if native is not None and not getattr(native, "disabled", True) and \
            _policy.keep_native("sglang"):
        return
    ranks = getattr(self, "ranks", None)
    backend = QuickReduceBackend(self.cpu_group, self.device,
                                 label="sglang-" + name.replace(":", "-"),
                                 rank=getattr(self, "rank_in_group", None),
                                 world_size=self.world_size, src=ranks[0] if ranks else None,
                                 batch_invariant=_policy.batch_invariant("sglang"), log=log)
    if backend.disabled:
        return
    if native is not None and hasattr(native, "close"):
        native.close()
    self.qr_comm = backend
    log.info("quickreduce serves the out-of-place all-reduces of group '%s' that SGLang "
             "routes to \"qr\"", name)
    ca = getattr(self, "ca_comm", None)
    if os.environ.get("QR_SGLANG_FIRST") == "1" and ca is not None and \
            hasattr(ca, "should_custom_ar"):
        native_should = ca.should_custom_ar
        ca.should_custom_ar = lambda t: not backend.should_quick_allreduce(t) and native_should(t)
    # Reduce-scatter / all-gather into tensors (_rsag.py): DP attention's and
    # the vocabulary-parallel logits' collectives of this group.
    if _rsag.install(type(self), _rsag.SGLANG_METHODS) and _rsag.supported(backend):
        log.info("quickreduce serves the fp16/bf16 reduce_scatter_tensor and "
                 "all_gather_into_tensor calls of group '%s' it takes", name)
    active = active_bypasses(self)
    # FlashInfer's fused all-reduce + residual + RMSNorm (_flashinfer.py)
    # now runs through this backend where it takes the call.
    _flashinfer.set_backend("sglang", backend)
    if "enable_flashinfer_allreduce_fusion" in active and \
            _flashinfer.arm("sglang", _flashinfer.SGLANG_MODULES):
        _policy.serve_path("sglang", "enable_flashinfer_allreduce_fusion")
    _policy.warn_bypass_once("sglang", active, log.warning)


def _after_destroy(self, *_):
    b = backend_of(self)
    if b is not None:
        if _flashinfer._backends.get("sglang") is b:
            _flashinfer.set_backend("sglang", None)
        b.close()
        self.qr_comm = None


def install(group_coordinator_class):
    """Wraps GroupCoordinator.__init__ and .destroy (idempotent)."""
    wrap_method(group_coordinator_class, "__init__", _after_init, logger())
    wrap_method(group_coordinator_class, "destroy", _after_destroy, logger())


def patch(module=None):
    """Installs into SGLang's GroupCoordinator (imports it unless given)."""
    try:
        _aliases.apply("sglang", log=logger().info)
    except _aliases.AliasError as e:
        logger().warning("quickreduce: %s", e)
        return
    try:
        if module is None:
            module = importlib.import_module(MODULE)
        install(module.GroupCoordinator)
    except Exception as e:
        logger().warning("quickreduce: SGLang's GroupCoordinator not found (%s); not patched", e)


def register():
    """The sglang.srt.plugins entry point: AFTER hooks through SGLang's
    HookRegistry, applied by load_plugins() right after the plugins ran."""
    global _registered
    if _registered or not enabled():
        return
    try:
        _aliases.apply("sglang", log=logger().info)
    except _aliases.AliasError as e:
        logger().warning("quickreduce: %s", e)
        return
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    except ImportError as e:  # a plugin system without the registry: patch directly
        logger().info("quickreduce: SGLang's HookRegistry not found (%s); patching", e)
        patch()
        _registered = True
        return
    target = MODULE + ".GroupCoordinator."
    HookRegistry.register(target + "__init__", lambda result, self, *a, **k: _after_init(self),
                          HookType.AFTER)
    HookRegistry.register(target + "destroy", lambda result, self, *a, **k: _after_destroy(self),
                          HookType.AFTER)
    _registered = True


def plugin_system_will_install():
    """True when SGLang has its plugin system and quickreduce's entry point is
    installed: register() then does the work and the .pth hook stands down."""
    if importlib.util.find_spec("sglang.srt.plugins") is None:
        return False
    from importlib.metadata import entry_points
    eps = entry_points()
    group = eps.select(group=PLUGIN_GROUP) if hasattr(eps, "select") else eps.get(PLUGIN_GROUP, [])
    return any(e.name == _policy.PLUGIN_NAME for e in group)


class _Hook(AfterImportHook):
    """Runs patch() right after MODULE is first executed."""

    def __init__(self):
        super().__init__([MODULE])

    def after_exec(self, module):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if not plugin_system_will_install():
            patch(module)


def arm():
    """The .pth hook (QR_SGLANG=1 only): patches SGLang now if it is imported,
    else as soon as it is, unless its plugin system will install quickreduce."""
    if os.environ.get("QR_SGLANG") != "1":
        return
    if MODULE in sys.modules:
        if not plugin_system_will_install():
            patch(sys.modules[MODULE])
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
