"""The torch ops of the fused layer boundary (docs/fused.md), registered by
ops.py beside the all-reduce ops:

    torch.ops.quickreduce.all_reduce_residual_rmsnorm(
        input, residual, weight, eps, group_name) -> (out, residual_out)
    torch.ops.quickreduce.all_reduce_residual_rmsnorm_(
        input, residual, weight, eps, group_name) -> ()
        # input <- out, residual <- residual_out (vLLM's fused_add_rms_norm)
    torch.ops.quickreduce.all_reduce_residual_rmsnorm_fp8(
        input, residual, weight, scale, eps, group_name) -> (quant, out, residual_out)
        # quant = e4m3fn(out * (1 / scale)): float8_e4m3fn, or uint8 codes
        # where torch has no float8 (older than 2.1)

As for the all-reduce ops, the choice between quickreduce and the fallback is
made each time the op runs: quickreduce when the communicator exists and
should_all_reduce(input) holds, else torch.distributed.all_reduce on the
registered process group followed by the same residual add and RMSNorm in
torch (fp32, not bit-identical to quickreduce's fixed summation order), and
for the FP8 op the same quantization: the dtype-rounded norm times 1 / scale
in fp32, clamped to +-448, converted to e4m3fn (nearest even)."""

import torch

from ._fused import quant_dtype

SCHEMAS = {
    "all_reduce_residual_rmsnorm":
        "all_reduce_residual_rmsnorm(Tensor input, Tensor? residual, Tensor weight, float eps, "
        "str group_name) -> (Tensor, Tensor)",
    "all_reduce_residual_rmsnorm_":
        "all_reduce_residual_rmsnorm_(Tensor(a!) input, Tensor(b!) residual, Tensor weight, "
        "float eps, str group_name) -> ()",
    "all_reduce_residual_rmsnorm_fp8":
        "all_reduce_residual_rmsnorm_fp8(Tensor input, Tensor? residual, Tensor weight, "
        "Tensor scale, float eps, str group_name) -> (Tensor, Tensor, Tensor)",
}
QUANT_DTYPE = quant_dtype()
E4M3_MAX = 448.0


def _fallback(pg, x, residual, weight, eps):
    import torch.distributed as dist
    s = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(s, group=pg)
    r = s if residual is None else (s.float() + residual.float()).to(x.dtype)
    rf = r.float()
    inv = torch.rsqrt(rf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (rf * inv * weight.float()).to(x.dtype), r


def e4m3_codes(v):
    """The e4m3fn codes (uint8) of float32 tensor v, for torch without
    float8_e4m3fn: nearest even, beyond +-448 saturating, NaN -> 0x7F. Exact:
    only scalings by powers of two and round-half-even of small integers."""
    a = v.abs().clamp(max=E4M3_MAX)                  # NaN stays NaN
    mant, exp = torch.frexp(a)                       # a = mant * 2^exp, mant in [0.5, 1)
    # Normal codes are (exponent field) * 8 + (3 mantissa bits): the field is
    # exp + 6; a mantissa that rounds up to 8 carries into the field.
    normal = (exp + 6).float() * 8 + torch.round((mant * 2 - 1) * 8)
    subnormal = torch.round(a * 512)                 # units of 2^-9; 8 is 2^-6, code 0x08
    code = torch.where(a >= 2.0 ** -6, normal, subnormal)
    code = torch.where(torch.signbit(v), code + 128, code)
    code = torch.where(torch.isnan(v), torch.full_like(code, 127), code)
    return code.to(torch.uint8)


def quantize(norm, scale):
    """e4m3fn(float(norm) * (1 / scale)) as the torch fallback computes it."""
    v = norm.float() * (1.0 / scale.reshape(()).float())
    if QUANT_DTYPE is torch.uint8:
        return e4m3_codes(v)
    return v.clamp(-E4M3_MAX, E4M3_MAX).to(QUANT_DTYPE)


def fused_impl(decide):
    def impl(x, residual, weight, eps, group_name):
        comm, pg = decide(x, group_name)
        if comm is not None:
            return comm.all_reduce_residual_rmsnorm(x, residual, weight, eps)
        return _fallback(pg, x, residual, weight, eps)
    return impl


def fused_inplace_impl(decide):
    def impl(x, residual, weight, eps, group_name):
        comm, pg = decide(x, group_name)
        if comm is not None:
            comm.all_reduce_residual_rmsnorm(x, residual, weight, eps, out=x,
                                             residual_out=residual)
            return
        out, r = _fallback(pg, x, residual, weight, eps)
        residual.copy_(r)
        x.copy_(out)
    return impl


def fused_fp8_impl(decide):
    def impl(x, residual, weight, scale, eps, group_name):
        comm, pg = decide(x, group_name)
        if comm is not None:
            return comm.all_reduce_residual_rmsnorm_fp8(x, residual, weight, eps, scale)
        out, r = _fallback(pg, x, residual, weight, eps)
        return quantize(out, scale), out, r
    return impl


def fake(x, residual, weight, eps, group_name):
    return torch.empty_like(x), torch.empty_like(x)


def fake_inplace(x, residual, weight, eps, group_name):
    return None


def fake_fp8(x, residual, weight, scale, eps, group_name):
    return (torch.empty(x.shape, dtype=QUANT_DTYPE, device=x.device), torch.empty_like(x),
            torch.empty_like(x))
