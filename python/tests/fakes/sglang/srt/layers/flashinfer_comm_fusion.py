"""Follows sgl-project/sglang python/sglang/srt/layers/flashinfer_comm_fusion.py
@cc28b8ab: _flashinfer_comm, a module global holding flashinfer.comm;
flashinfer_allreduce_residual_rmsnorm (what RMSNorm.forward_with_allreduce_
fusion calls), which returns (None, None) without FlashInfer or with one rank,
else runs _flashinfer_comm.trtllm_allreduce_fusion into fresh norm_out /
residual_out with pattern kARResidualRMSNorm and returns them. Left out: the
IPC workspace manager (a stand-in workspace), the custom-op registration
(the registered function is this one, reading the global at each call);
get_tensor_model_parallel_world_size and the rank are torch.distributed's."""
import torch
import torch.distributed as dist

_flashinfer_comm = None
try:
    import flashinfer.comm as comm

    _flashinfer_comm = comm
except ImportError:
    pass

_WORKSPACE = object()


def flashinfer_allreduce_residual_rmsnorm(input_tensor, residual, weight, eps=1e-6,
                                          max_token_num=2048, use_oneshot=None,
                                          trigger_completion_at_end=False, fp32_acc=False):
    if _flashinfer_comm is None:
        return None, None
    world_size = dist.get_world_size()
    if world_size <= 1:
        return None, None
    token_num, hidden_dim = input_tensor.shape
    residual_out = torch.empty_like(residual)
    norm_out = torch.empty_like(input_tensor)
    _flashinfer_comm.trtllm_allreduce_fusion(
        allreduce_in=input_tensor, world_size=world_size, world_rank=dist.get_rank(),
        token_num=token_num, hidden_dim=hidden_dim, workspace_ptrs=_WORKSPACE,
        launch_with_pdl=True, use_oneshot=use_oneshot,
        trigger_completion_at_end=trigger_completion_at_end, fp32_acc=fp32_acc,
        pattern_code=_flashinfer_comm.AllReduceFusionPattern.kARResidualRMSNorm,
        allreduce_out=None, residual_in=residual, residual_out=residual_out,
        norm_out=norm_out, quant_out=None, scale_out=None, rms_gamma=weight, rms_eps=eps,
        scale_factor=None, layout_code=None)
    return norm_out, residual_out
