"""Serving the stacks' FlashInfer fused all-reduce + residual add + RMSNorm
with quickreduce's fused collective (docs/fused.md), where the adapter is on.

The hook is the least invasive one that holds across the stacks' versions:
the function that launches FlashInfer's fused kernel reads FlashInfer's comm
module from a global of its own module at each call, so that global becomes
a proxy whose fused entry points run
Communicator.all_reduce_residual_rmsnorm when quickreduce takes the call and
FlashInfer's own function otherwise. Everything else (workspaces, patterns,
the torch ops the compiler passes insert, CUDA graphs) stays the stack's.

Where the global lives (read against the stacks' code):
- vLLM vllm/compilation/passes/fusion/allreduce_rms_fusion.py
  (vllm-project/vllm@889b02f9): call_trtllm_fused_allreduce_norm, the body of
  torch.ops.vllm.flashinfer_trtllm_fused_allreduce_norm that
  AllReduceFusionPass inserts, calls flashinfer_comm.allreduce_fusion(input=,
  workspace=, pattern=, residual_in=, residual_out=, norm_out=, rms_gamma=,
  rms_eps=, quant_out=, scale_out=, ...); with norm_out None it normalizes in
  place (norm_out = allreduce_in, residual_out = residual), else residual_out
  = allreduce_in. Older releases: vllm/compilation/collective_fusion.py
  (@6a303fe2), the same function calling flashinfer_comm.
  trtllm_allreduce_fusion(allreduce_in=, world_size=, world_rank=, token_num=,
  hidden_dim=, pattern_code=, allreduce_out=None, ...).
- SGLang python/sglang/srt/layers/flashinfer_comm_fusion.py
  (sgl-project/sglang@cc28b8ab): flashinfer_allreduce_residual_rmsnorm, which
  the RMSNorm layer's forward_with_allreduce_fusion calls, runs
  _flashinfer_comm.trtllm_allreduce_fusion(...) into fresh norm_out /
  residual_out; newer SGLang calls the module global _allreduce_fusion
  (flashinfer.comm.allreduce's allreduce_fusion, the keywords above), which
  is wrapped the same way.

Which calls quickreduce takes: pattern kARResidualRMSNorm (no quantized
output, no all-reduce output, weight_bias 0), float16/bfloat16 tensors on the
communicator's device, a contiguous [*, hidden] input with hidden a whole
number of 16-byte rows, and the message size that the adapter's all-reduce
takes (QuickReduceBackend.should_quick_allreduce: the same answer on every
rank). The rest goes to FlashInfer unchanged.
"""

import importlib
import importlib.util
import sys

from ._import_hook import AfterImportHook

VLLM_MODULES = ("vllm.compilation.passes.fusion.allreduce_rms_fusion",
                "vllm.compilation.collective_fusion")
SGLANG_MODULES = ("sglang.srt.layers.flashinfer_comm_fusion",)
# The module globals that hold FlashInfer's comm module, and (SGLang, newer)
# its unified allreduce_fusion function.
COMM_GLOBALS = ("flashinfer_comm", "_flashinfer_comm")
FUNCTION_GLOBALS = ("_allreduce_fusion",)

_backends = {}  # stack -> the QuickReduceBackend of its TP group
_patched = set()


def set_backend(stack, backend):
    """The backend the stack's fused calls go to (None: none)."""
    _backends[stack] = backend


def _pattern(real, kwargs):
    p = kwargs.get("pattern", kwargs.get("pattern_code"))
    pats = getattr(real, "AllReduceFusionPattern", None)
    want = getattr(pats, "kARResidualRMSNorm", None)
    return p is not None and want is not None and (p is want or p == want)


def takes(backend, real, kwargs):
    """Whether quickreduce serves this FlashInfer fused call (docstring)."""
    if backend is None or backend.disabled or backend.comm is None or not _pattern(real, kwargs):
        return False
    for k in ("quant_out", "scale_out", "allreduce_out", "output", "scale_factor"):
        if kwargs.get(k) is not None:
            return False
    if kwargs.get("weight_bias") not in (None, 0, 0.0):
        return False
    ws = kwargs.get("world_size")
    if ws is not None and ws != backend.world_size:
        return False
    x = kwargs.get("input", kwargs.get("allreduce_in"))
    others = [kwargs.get(k) for k in ("residual_in", "residual_out", "norm_out", "rms_gamma")]
    if x is None or any(t is None for t in others):
        return False
    gamma = others[-1]
    hidden = gamma.numel()
    if hidden == 0 or x.dim() == 0 or x.shape[-1] != hidden or \
            (hidden * x.element_size()) % 16:
        return False
    for t in [x] + others:
        if t.dtype != x.dtype or t.device != x.device or not t.is_contiguous():
            return False
    return backend.should_quick_allreduce(x)


def run(backend, kwargs):
    x = kwargs.get("input", kwargs.get("allreduce_in"))
    regime = "FP" if backend.batch_invariant else None
    backend.comm.all_reduce_residual_rmsnorm(
        x, kwargs["residual_in"], kwargs["rms_gamma"], float(kwargs["rms_eps"]),
        out=kwargs["norm_out"], residual_out=kwargs["residual_out"], regime=regime)


def _wrap(stack, real_module, fn):
    def fused(*args, **kwargs):
        backend = _backends.get(stack)
        if not args and takes(backend, real_module, kwargs):
            run(backend, kwargs)
            return None
        return fn(*args, **kwargs)
    fused._quickreduce = True
    fused.__wrapped__ = fn
    return fused


class CommProxy:
    """FlashInfer's comm module with its fused entry points served first by
    quickreduce; every other attribute is FlashInfer's."""

    def __init__(self, stack, real):
        self._real = real
        for name in ("allreduce_fusion", "trtllm_allreduce_fusion"):
            fn = getattr(real, name, None)
            if fn is not None:
                setattr(self, name, _wrap(stack, real, fn))

    def __getattr__(self, name):
        return getattr(self._real, name)


def patch_module(stack, module):
    """Installs the proxy into `module` (idempotent). True when a FlashInfer
    fused entry point is now served."""
    served = False
    for g in COMM_GLOBALS:
        real = getattr(module, g, None)
        if isinstance(real, CommProxy):
            served = True
        elif real is not None:
            setattr(module, g, CommProxy(stack, real))
            served = True
    pats = getattr(module, "_AllReduceFusionPattern", None)
    for g in FUNCTION_GLOBALS:
        fn = getattr(module, g, None)
        if fn is not None and not getattr(fn, "_quickreduce", False) and pats is not None:
            class _Pats:  # what takes() reads of the real module
                AllReduceFusionPattern = pats
            setattr(module, g, _wrap(stack, _Pats, fn))
            served = True
        elif getattr(fn, "_quickreduce", False):
            served = True
    if served:
        _patched.add(module.__name__)
    return served


class _AfterImport(AfterImportHook):
    """Runs patch_module right after one of `names` is first executed."""

    def __init__(self, stack, names):
        super().__init__(names)
        self.stack = stack

    def after_exec(self, module):
        patch_module(self.stack, module)


def _exists(name):
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:  # a parent package that fails to import: nothing to serve
        return False


def arm(stack, names):
    """Serves the stack's FlashInfer fusion: patches the modules of `names`
    already imported, and the others as soon as they are. Returns the names
    that exist in this installation (empty: this stack version has none of
    them, nothing is served)."""
    present = [n for n in names if n in sys.modules or _exists(n)]
    for n in present:
        if n in sys.modules:
            patch_module(stack, sys.modules[n])
    pending = [n for n in present if n not in sys.modules]
    if pending and not any(isinstance(f, _AfterImport) and f.stack == stack
                           for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(stack, pending))
    return present
