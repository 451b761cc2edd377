"""Follows flashinfer-ai/flashinfer flashinfer/comm: AllReduceFusionPattern's
codes (trtllm_ar.py @f6b0edcc, the kernel header's enum: kAllReduce 0,
kARResidualRMSNorm 1, the FP8/FP4 quantizing patterns 2..5), the legacy
trtllm_allreduce_fusion (keywords: allreduce_in, world_size, world_rank,
token_num, hidden_dim, workspace_ptrs, pattern_code, allreduce_out,
residual_in, residual_out, norm_out, quant_out, scale_out, rms_gamma,
rms_eps, ...) and the unified allreduce_fusion of allreduce.py @ba1f2066
(input, workspace, pattern, output, residual_in, residual_out, norm_out,
quant_out, scale_out, rms_gamma, rms_eps, weight_bias, ...), as vLLM and
SGLang call them. The kernel is stood in for by torch.distributed on the
default group: the sum in fp32, residual_out = sum + residual_in,
norm_out = RMSNorm(residual_out) * gamma, written by the patterns that have a
norm output (kARResidualRMSNorm and the Out ones: HasNormOut in FusedOp,
include/flashinfer/comm/trtllm_allreduce_fusion.cuh @04ebdfd2, where the FP8
patterns quantize norm * (1 / *scale_factor)). The fake quantizes nothing:
quant_out and scale_out keep what they held. CALLS records (input shape,
pattern) of the calls that reached FlashInfer (those the adapter leaves it)."""
import torch
import torch.distributed as dist

CALLS = []


class AllReduceFusionPattern:
    kAllReduce = 0
    kARResidualRMSNorm = 1
    kARResidualRMSNormFP8Quant = 2
    kARResidualRMSNormFP4Quant = 3
    kARResidualRMSNormOutFP8Quant = 4
    kARResidualRMSNormOutFP4Quant = 5


class QuantizationSFLayout:
    SWIZZLED_128x4 = 0
    LINEAR = 2


def create_allreduce_fusion_workspace(**kwargs):
    return dict(kwargs)


def _fused(x, residual_in, residual_out, norm_out, rms_gamma, rms_eps, pattern):
    p = AllReduceFusionPattern
    assert p.kARResidualRMSNorm <= pattern <= p.kARResidualRMSNormOutFP4Quant, pattern
    s = x.float().clone()
    dist.all_reduce(s)
    r = (s.to(x.dtype).float() + residual_in.float()).to(x.dtype)
    rf = r.float()
    n = (rf * torch.rsqrt(rf.pow(2).mean(dim=-1, keepdim=True) + rms_eps) *
         rms_gamma.float()).to(x.dtype)
    residual_out.copy_(r)
    if pattern in (p.kARResidualRMSNorm, p.kARResidualRMSNormOutFP8Quant,
                   p.kARResidualRMSNormOutFP4Quant):
        norm_out.copy_(n)
    CALLS.append((tuple(x.shape), pattern))


def trtllm_allreduce_fusion(*, allreduce_in, world_size, world_rank, token_num, hidden_dim,
                            workspace_ptrs, launch_with_pdl, use_oneshot,
                            trigger_completion_at_end, fp32_acc, pattern_code, allreduce_out,
                            residual_in, residual_out, norm_out, quant_out, scale_out,
                            rms_gamma, rms_eps, scale_factor, layout_code):
    _fused(allreduce_in, residual_in, residual_out, norm_out, rms_gamma, rms_eps, pattern_code)


def allreduce_fusion(*, input, workspace, pattern, launch_with_pdl=False, output=None,
                     residual_in=None, residual_out=None, norm_out=None, quant_out=None,
                     scale_out=None, rms_gamma=None, rms_eps=1e-6, scale_factor=None,
                     layout_code=None, use_oneshot=None, fp32_acc=False, weight_bias=0.0,
                     trigger_completion_at_end=True):
    _fused(input, residual_in, residual_out, norm_out, rms_gamma, rms_eps, pattern)
