// The residual add and RMSNorm that end Collective::kAllReduceResidualRmsNorm
// on a GPU (kernels/rmsnorm_reference.h is the specification; docs/fused.md):
// one kernel over the all-reduce's output in norm_out, one block of
// kRmsNormLanes threads per token row, thread t playing lane t of the
// reference's sum of squares and the shared-memory tree its pairwise tree,
// so the GPU's bits are the host's. Enqueued right after the all-reduce on
// the same stream (RankState::LaunchResidualRmsNorm), graph-capture safe.
#ifndef QR_KERNELS_GPU_RMSNORM_EPILOGUE_H_
#define QR_KERNELS_GPU_RMSNORM_EPILOGUE_H_

#include <cstddef>

#include "common/status.h"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/types.h"

namespace qr::kernels {

// Device pointers of one rank, 16-byte aligned. norm_out holds the
// all-reduce's result on entry. residual_out may equal residual (or the
// all-reduce's input, which the epilogue does not read); nothing else
// overlaps.
struct ResidualRmsNormRequest {
  DType dtype = DType::kFloat16;
  const void* residual = nullptr;  // tokens x hidden, or nullptr: none
  const void* weight = nullptr;    // hidden
  void* residual_out = nullptr;    // tokens x hidden
  void* norm_out = nullptr;        // tokens x hidden
  size_t tokens = 0;
  size_t hidden = 0;  // a positive multiple of kRmsNormChunkElems
  float eps = 0;
  // The FP8 output (kernels/rmsnorm_reference.h quant_out): tokens x hidden
  // e4m3 bytes, 16-byte aligned, and the fp32 scale in device memory, read
  // when the kernel runs. Both nullptr: none.
  void* quant_out = nullptr;
  const float* quant_scale = nullptr;
  // RankState::LaunchResidualRmsNorm: a one-shot request whose rows fit
  // runs as ONE kernel (the all-reduce and this epilogue,
  // kernels/gpu/one_shot_fused.cu); false keeps the two launches (tests and
  // qr-kernel-cost compare the two). The bits are the same either way.
  bool one_launch = true;
  // true: a two-shot request whose rows split exactly
  // (kernels/fused_split.h) runs in the row-split form: reduce-scatter by
  // rows, each rank's epilogue on its rows, all-gathers of the outputs.
  // Off by default: on one H200 it took 1.4-1.66x the all-reduce and the
  // epilogue on every row (four or five launches against two, and the
  // all-gathers move twice the all-reduce's second hop; docs/fused.md).
  // The bits are the same either way.
  bool split_rows = false;
  // true (with one_launch): one kernel whenever the call fits it
  // (FusedOneLaunchFits), even where the policy (FusedOneLaunchPays) would
  // run two; the GPU tests and qr-kernel-cost use it to check and time the
  // kernel at every shape. The bits are the same either way.
  bool one_launch_always = false;
  // The one-launch kernel's thread layout (one_shot_fused_slots.h
  // FusedRowForm); kPolicy unless a test or qr-kernel-cost compares them.
  // The bits are the same either way.
  FusedRowForm form = FusedRowForm::kPolicy;
};

// kInvalidArgument for a bad request (checked before the GPU is touched),
// kInternal on a launch error. tokens == 0 does nothing. overlap: launch
// with programmatic overlap of the previous kernel where the GPU has it
// (kernels/platform/launch.cuh).
[[nodiscard]] Status LaunchResidualRmsNormEpilogue(const ResidualRmsNormRequest& r,
                                                   ::qr::gpu::Stream stream, bool overlap = false);

// The checks LaunchResidualRmsNormEpilogue makes before it launches
// (kInvalidArgument), for launchers of kernels that include the epilogue.
[[nodiscard]] Status ValidateResidualRmsNorm(const ResidualRmsNormRequest& r);

// Makes sure the epilogue's kernels are loaded on the current device, so that
// their first launch never loads a module. Loading one may synchronize the
// whole device (CUDA's lazy loading, the default since CUDA 12.2): enqueued
// after an all-reduce whose peers have not launched yet on that device (all
// ranks of a LocalGroup in one process), it would wait for a kernel that
// waits for it. Call before enqueueing the all-reduce; later calls return at
// once. kInternal on a runtime error.
[[nodiscard]] Status LoadResidualRmsNormEpilogue();

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_RMSNORM_EPILOGUE_H_
