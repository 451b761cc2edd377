"""The torch ops of the fused layer boundary (docs/fused.md), registered by
ops.py beside the all-reduce ops:

    torch.ops.quickreduce.all_reduce_residual_rmsnorm(
        input, residual, weight, eps, group_name) -> (out, residual_out)
    torch.ops.quickreduce.all_reduce_residual_rmsnorm_(
        input, residual, weight, eps, group_name) -> ()
        # input <- out, residual <- residual_out (vLLM's fused_add_rms_norm)

As for the all-reduce ops, the choice between quickreduce and the fallback is
made each time the op runs: quickreduce when the communicator exists and
should_all_reduce(input) holds, else torch.distributed.all_reduce on the
registered process group followed by the same residual add and RMSNorm in
torch (fp32, not bit-identical to quickreduce's fixed summation order)."""

import torch

SCHEMAS = {
    "all_reduce_residual_rmsnorm":
        "all_reduce_residual_rmsnorm(Tensor input, Tensor? residual, Tensor weight, float eps, "
        "str group_name) -> (Tensor, Tensor)",
    "all_reduce_residual_rmsnorm_":
        "all_reduce_residual_rmsnorm_(Tensor(a!) input, Tensor(b!) residual, Tensor weight, "
        "float eps, str group_name) -> ()",
}


def _fallback(pg, x, residual, weight, eps):
    import torch.distributed as dist
    s = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(s, group=pg)
    r = s if residual is None else (s.float() + residual.float()).to(x.dtype)
    rf = r.float()
    inv = torch.rsqrt(rf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (rf * inv * weight.float()).to(x.dtype), r


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


def fake(x, residual, weight, eps, group_name):
    return torch.empty_like(x), torch.empty_like(x)


def fake_inplace(x, residual, weight, eps, group_name):
    return None
