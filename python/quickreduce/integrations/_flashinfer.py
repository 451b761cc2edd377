"""Serving the stacks' FlashInfer fused all-reduce + residual add + RMSNorm
with quickreduce's fused collective (docs/fused.md), where the adapter is on.

The hook is the least invasive one that holds across the stacks' versions:
the function that launches FlashInfer's fused kernel reads FlashInfer's comm
module from a global of its own module at each call, so that global becomes
a proxy whose fused entry points run
Communicator.all_reduce_residual_rmsnorm (or its _fp8 form) when quickreduce
takes the call and FlashInfer's own function otherwise. Everything else (workspaces, patterns,
the torch ops the compiler passes insert, CUDA graphs) stays the stack's.

Where the global lives (read against the stacks' code):
- vLLM vllm/compilation/passes/fusion/allreduce_rms_fusion.py
  (vllm-project/vllm@889b02f9): call_trtllm_fused_allreduce_norm, the body of
  torch.ops.vllm.flashinfer_trtllm_fused_allreduce_norm that
  AllReduceFusionPass inserts, calls flashinfer_comm.allreduce_fusion(input=,
  workspace=, pattern=, residual_in=, residual_out=, norm_out=, rms_gamma=,
  rms_eps=, quant_out=, scale_out=, scale_factor=, ...); with norm_out None
  it normalizes in place (norm_out = allreduce_in, residual_out = residual),
  else residual_out = allreduce_in. Its static FP8 patterns pass
  kARResidualRMSNormFP8Quant with a fresh float8_e4m3fn quant_out and the
  static scale ([1, 1] float32) as scale_factor:
  AllReduceFusedAddRMSNormStaticQuantFP8Pattern with norm_out None (residual
  in place), AllReduceFusedRMSNormStaticQuantFP8Pattern with a zero residual
  and a fresh norm_out (allreduce_in <- the all-reduce). Older releases:
  vllm/compilation/collective_fusion.py (@6a303fe2), the same function and
  patterns calling flashinfer_comm.trtllm_allreduce_fusion(allreduce_in=,
  world_size=, world_rank=, token_num=, hidden_dim=, pattern_code=,
  allreduce_out=None, ...).
- SGLang python/sglang/srt/layers/flashinfer_comm_fusion.py
  (sgl-project/sglang@cc28b8ab): flashinfer_allreduce_residual_rmsnorm, which
  the RMSNorm layer's forward_with_allreduce_fusion calls, runs
  _flashinfer_comm.trtllm_allreduce_fusion(...) into fresh norm_out /
  residual_out; newer SGLang calls the module global _allreduce_fusion
  (flashinfer.comm.allreduce's allreduce_fusion, the keywords above), which
  is wrapped the same way. SGLang asks for no FP8 pattern there (its
  python/sglang/srt/compilation/collective_fusion.py @3e6cc2af leaves the
  static FP8 patterns a TODO); a call that does is served as vLLM's are.

Which calls quickreduce takes: patterns kARResidualRMSNorm (no quantized
output), kARResidualRMSNormFP8Quant and kARResidualRMSNormOutFP8Quant
(Communicator.all_reduce_residual_rmsnorm_fp8: quant_out = e4m3fn(norm *
(1 / scale_factor)), as FlashInfer's kernel computes it, FusedOp in
include/flashinfer/comm/trtllm_allreduce_fusion.cuh @04ebdfd2; vLLM passes its
static FP8 scale as scale_factor), with no all-reduce output and weight_bias
0; float16/bfloat16 tensors on the communicator's device, a contiguous
[*, hidden] input with hidden a whole number of 16-byte rows, and the message
size that the adapter's all-reduce takes (QuickReduceBackend.
should_quick_allreduce: the same answer on every rank). The FP8 patterns need
a contiguous quant_out of float8_e4m3fn (or uint8) with one value per input
value and a float32 scale_factor tensor of one element on that device (a
Python float scale goes to FlashInfer). kARResidualRMSNormFP8Quant writes no
norm_out in FlashInfer; here the norm goes to norm_out where one is given
(vLLM gives allreduce_in or a fresh tensor, and reads neither), else to a
scratch tensor. The rest (FP4 patterns, other sizes and dtypes) goes to
FlashInfer unchanged.
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


# The patterns quickreduce serves, by AllReduceFusionPattern name: whether
# each quantizes to FP8, and whether it must write norm_out.
PATTERNS = {"kARResidualRMSNorm": (False, True),
            "kARResidualRMSNormFP8Quant": (True, False),
            "kARResidualRMSNormOutFP8Quant": (True, True)}


def _pattern(real, kwargs):
    """The name of the call's pattern where it is one of PATTERNS, else None."""
    p = kwargs.get("pattern", kwargs.get("pattern_code"))
    pats = getattr(real, "AllReduceFusionPattern", None)
    if p is None or pats is None:
        return None
    for name in PATTERNS:
        want = getattr(pats, name, None)
        if want is not None and (p is want or p == want):
            return name
    return None


def _fp8_outputs_fit(x, quant, scale):
    if quant is None or scale is None or not hasattr(scale, "dtype"):
        return False
    return (str(quant.dtype).replace("torch.", "") in ("float8_e4m3fn", "uint8") and
            quant.device == x.device and quant.is_contiguous() and
            quant.numel() == x.numel() and str(scale.dtype) == "torch.float32" and
            scale.numel() == 1 and scale.device == x.device)


def takes(backend, real, kwargs):
    """The name of the pattern when quickreduce serves this FlashInfer fused
    call (docstring), else None."""
    if backend is None or backend.disabled or backend.comm is None:
        return None
    pattern = _pattern(real, kwargs)
    if pattern is None:
        return None
    fp8, norm_required = PATTERNS[pattern]
    unused = ("allreduce_out", "output", "scale_out") + (() if fp8 else
                                                         ("quant_out", "scale_factor"))
    if any(kwargs.get(k) is not None for k in unused):
        return None
    if kwargs.get("weight_bias") not in (None, 0, 0.0):
        return None
    ws = kwargs.get("world_size")
    if ws is not None and ws != backend.world_size:
        return None
    x = kwargs.get("input", kwargs.get("allreduce_in"))
    norm = kwargs.get("norm_out")
    others = [kwargs.get(k) for k in ("residual_in", "residual_out", "rms_gamma")]
    if x is None or any(t is None for t in others) or (norm is None and norm_required):
        return None
    gamma = others[-1]
    hidden = gamma.numel()
    if hidden == 0 or x.dim() == 0 or x.shape[-1] != hidden or \
            (hidden * x.element_size()) % 16:
        return None
    for t in [x] + others + ([] if norm is None else [norm]):
        if t.dtype != x.dtype or t.device != x.device or not t.is_contiguous():
            return None
    if fp8 and not _fp8_outputs_fit(x, kwargs.get("quant_out"), kwargs.get("scale_factor")):
        return None
    return pattern if backend.should_quick_allreduce(x) else None


def run(backend, kwargs, pattern="kARResidualRMSNorm"):
    x = kwargs.get("input", kwargs.get("allreduce_in"))
    regime = "FP" if backend.batch_invariant else None
    if not PATTERNS[pattern][0]:
        backend.comm.all_reduce_residual_rmsnorm(
            x, kwargs["residual_in"], kwargs["rms_gamma"], float(kwargs["rms_eps"]),
            out=kwargs["norm_out"], residual_out=kwargs["residual_out"], regime=regime)
        return
    norm = kwargs.get("norm_out")
    backend.comm.all_reduce_residual_rmsnorm_fp8(
        x, kwargs["residual_in"], kwargs["rms_gamma"], float(kwargs["rms_eps"]),
        kwargs["scale_factor"], out=x.new_empty(x.shape) if norm is None else norm,
        residual_out=kwargs["residual_out"], quant_out=kwargs["quant_out"], regime=regime)


def _wrap(stack, real_module, fn):
    def fused(*args, **kwargs):
        backend = _backends.get(stack)
        pattern = None if args else takes(backend, real_module, kwargs)
        if pattern is not None:
            run(backend, kwargs, pattern)
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
