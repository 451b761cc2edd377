"""Follows vllm-project/vllm vllm/compilation/passes/fusion/
allreduce_rms_fusion.py @889b02f9: flashinfer_comm, a module global set when
flashinfer.comm has allreduce_fusion and create_allreduce_fusion_workspace;
call_trtllm_fused_allreduce_norm, the body of
torch.ops.vllm.flashinfer_trtllm_fused_allreduce_norm that AllReduceFusionPass
inserts, reading flashinfer_comm at each call and calling
flashinfer_comm.allreduce_fusion with its keywords. What the pass's
replacement graphs pass it:
- AllReduceFusedAddRMSNormPattern: norm_out=None (in place);
  AllReduceRMSNormPattern: a zero residual and a fresh norm_out.
- The static FP8 patterns: pattern_code kARResidualRMSNormFP8Quant, a fresh
  float8_e4m3fn quant_out, the static scale ([1, 1] float32) as scale_factor;
  AllReduceFusedAddRMSNormStaticQuantFP8Pattern with norm_out=None,
  AllReduceFusedRMSNormStaticQuantFP8Pattern with a zero residual and a
  fresh norm_out.
- The NVFP4 ones: kARResidualRMSNormFP4Quant, a uint8 quant_out of half the
  width, an int32 scale_out and the global scale as scale_factor.
Left out: the op registration (direct_register_custom_op keeps the function,
which reads the global, so the op behaves as the function), the pattern
classes, the device-capability one-shot table (use_oneshot True here)."""
from importlib.util import find_spec

flashinfer_comm = None
if find_spec("flashinfer"):
    try:
        import flashinfer.comm as _flashinfer_comm

        if hasattr(_flashinfer_comm, "allreduce_fusion") and hasattr(
                _flashinfer_comm, "create_allreduce_fusion_workspace"):
            flashinfer_comm = _flashinfer_comm
    except ImportError:
        pass

_FI_WORKSPACE = None


def init_workspace(world_size):
    global _FI_WORKSPACE
    _FI_WORKSPACE = flashinfer_comm.create_allreduce_fusion_workspace(world_size=world_size)


def call_trtllm_fused_allreduce_norm(allreduce_in, residual, rms_gamma, rms_eps, world_size,
                                     launch_with_pdl, fp32_acc, max_token_num, pattern_code,
                                     norm_out=None, quant_out=None, scale_out=None,
                                     scale_factor=None):
    num_tokens, hidden_size = allreduce_in.shape
    assert num_tokens <= max_token_num
    use_oneshot = True
    assert _FI_WORKSPACE is not None, "Flashinfer must be enabled when using flashinfer"
    if norm_out is None:
        norm_out = allreduce_in
        residual_out = residual
    else:
        residual_out = allreduce_in
    flashinfer_comm.allreduce_fusion(
        input=allreduce_in, workspace=_FI_WORKSPACE, pattern=pattern_code,
        residual_in=residual, residual_out=residual_out, norm_out=norm_out,
        rms_gamma=rms_gamma, rms_eps=rms_eps, launch_with_pdl=launch_with_pdl,
        use_oneshot=use_oneshot, fp32_acc=fp32_acc, quant_out=quant_out, scale_out=scale_out,
        layout_code=flashinfer_comm.QuantizationSFLayout.SWIZZLED_128x4,
        scale_factor=scale_factor)
