"""vLLM's and SGLang's reduce-scatter and all-gather through quickreduce.

vLLM's sequence-parallelism pass (PassConfig.enable_sp) replaces a TP
all-reduce with torch.ops.vllm.reduce_scatter(x, dim=0, ...) and, after the
RMSNorm on the shard, torch.ops.vllm.all_gather(x, dim=0, ...); both reach
GroupCoordinator._reduce_scatter_out_place / _all_gather_out_place, which
call the device communicator's reduce_scatter(input_, dim) / all_gather(
input_, dim). Read against vllm-project/vllm vllm/distributed/
device_communicators/cuda_communicator.py (the newest stored copy, upstream
sha256 102d95c6..., index id 71111748962): all_gather routes dim 0 to NCCL
symmetric memory when that is on, else pynccl (base class without it);
reduce_scatter moves `dim` to the front, makes it contiguous and runs pynccl
(or symmetric memory). These two methods are the hook: wrapped so that a
float16/bfloat16 call along dimension 0 that quickreduce takes
(_collectives.should_run: the communicator's device, contiguous, 16-byte
shards, the all-reduce's size rule for the whole message) runs
Communicator.reduce_scatter / all_gather, and every other call runs vLLM's
own method unchanged. The all-gather always runs FP (an exact copy, as
vLLM's is); the reduce-scatter runs the configured regime, as the adapter's
all-reduce does, and FP under batch invariance.

SGLang's GroupCoordinator (sgl-project/sglang python/sglang/srt/distributed/
parallel_state.py @0005973a) has the NCCL-style forms: reduce_scatter_tensor(
output, input) and all_gather_into_tensor(output, input) reach
_reduce_scatter_tensor / _all_gather_into_tensor, directly on CPU and NPU and
through the custom ops reg_reduce_scatter_tensor / reg_all_gather_into_tensor
(opaque to Dynamo) elsewhere; all_gather(input_, dim) and
reduce_scatter_along_dim(input_, dim) move `dim` to the front and call those
two. DP attention's gathers and scatters and the vocabulary-parallel logits
take this path. Those two bodies are wrapped the same way (SGLANG_METHODS)."""

from .. import _collectives
from ..errors import Unsupported
from ._backend import backend_of


def supported(b):
    """Whether the adapter serves b's reduce-scatter / all-gather: on host and
    GPU communicators alike, until one refused a call (rsag_unsupported:
    Unsupported comes before anything is sent, so every rank falls back at
    the same call and stays with the stack's own from then on)."""
    return b is not None and b.comm is not None and not getattr(b, "rsag_unsupported", False)


def _dim0(x, dim):
    return x.dim() > 0 and (dim + x.dim() if dim < 0 else dim) == 0


def _regime(b, gather):
    return "FP" if b.batch_invariant or gather else None


def _takes(b, x, gather):
    if b is None or b.disabled or not supported(b):
        return False
    if str(x.dtype) not in ("torch.float16", "torch.bfloat16"):
        return False
    return _collectives.should_run(b.comm, x, gather, regime=_regime(b, gather))


def reduce_scatter(original):
    def wrapper(self, input_, dim=-1):
        b = backend_of(self)
        if _dim0(input_, dim) and _takes(b, input_, False):
            import torch
            ws = b.world_size
            out = torch.empty((input_.shape[0] // ws,) + tuple(input_.shape[1:]),
                              dtype=input_.dtype, device=input_.device)
            try:
                b.comm.reduce_scatter(input_, out=out, regime=_regime(b, False))
                self.taken_by_rsag = "qr"
                return out
            except Unsupported:  # refused before anything is sent, on every rank alike
                b.rsag_unsupported = True
        self.taken_by_rsag = "vllm"
        return original(self, input_, dim)
    return wrapper


def all_gather(original):
    def wrapper(self, input_, dim=-1):
        b = backend_of(self)
        if _dim0(input_, dim) and _takes(b, input_, True):
            import torch
            out = torch.empty((input_.shape[0] * b.world_size,) + tuple(input_.shape[1:]),
                              dtype=input_.dtype, device=input_.device)
            try:
                b.comm.all_gather(input_, out=out, regime=_regime(b, True))
                self.taken_by_rsag = "qr"
                return out
            except Unsupported:  # refused before anything is sent, on every rank alike
                b.rsag_unsupported = True
        self.taken_by_rsag = "vllm"
        return original(self, input_, dim)
    return wrapper


def _into(gather, stack):
    """A wrapper for the (self, output, input) form: SGLang's
    _reduce_scatter_tensor / _all_gather_into_tensor."""
    def make(original):
        def wrapper(self, output, input):
            b = backend_of(self)
            ws = b.world_size if b is not None else 0
            sized = output.numel() * (1 if gather else ws) == input.numel() * (ws if gather else 1)
            if sized and output.is_contiguous() and output.dtype == input.dtype and \
                    _takes(b, input, gather):
                run = b.comm.all_gather if gather else b.comm.reduce_scatter
                try:
                    run(input, out=output, regime=_regime(b, gather))
                    self.taken_by_rsag = "qr"
                    return None if gather else output
                except Unsupported:  # refused before anything is sent, on every rank alike
                    b.rsag_unsupported = True
            self.taken_by_rsag = stack
            return original(self, output, input)
        return wrapper
    return make


VLLM_METHODS = (("reduce_scatter", reduce_scatter), ("all_gather", all_gather))
SGLANG_METHODS = (("_reduce_scatter_tensor", _into(False, "sglang")),
                  ("_all_gather_into_tensor", _into(True, "sglang")))


def install(cls, methods=VLLM_METHODS):
    """Wraps cls's reduce-scatter and all-gather methods named in `methods`
    (idempotent). False when the class has none of them (an older stack:
    nothing is served)."""
    done = False
    for name, make in methods:
        original = cls.__dict__.get(name) or getattr(cls, name, None)
        if original is None:
            continue
        done = True
        if getattr(original, "_quickreduce", False):
            continue
        w = make(original)
        w._quickreduce = True
        w.__wrapped__ = original
        w.__name__ = name
        setattr(cls, name, w)
    return done
