// RankState::LaunchResidualRmsNorm (rank_state.h): the fused collective as
// one kernel (the one-shot form whose token rows fit the fused kernel's
// slots, kernels/gpu/one_shot_fused.cu), in the row-split form
// (rank_state_split.cu) or as two launches on one stream (the all-reduce
// exactly as Launch enqueues it, then the epilogue).
#include <hip/hip_runtime.h>

#include <string>

#include "common/status_macros.h"
#include "kernels/gpu/one_shot_fused.cuh"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/gpu/rank_state_impl.cuh"
#include "kernels/platform/cluster.cuh"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/launch.cuh"
#include "kernels/platform/platform.h"
#include "kernels/rmsnorm_lanes.h"
#include "kernels/types.h"

namespace qr::kernels {
namespace {

FusedLaunchShape ShapeFor(const ResidualRmsNormRequest& norm, int max_blocks, int world_size) {
  return FusedShapeOf(static_cast<int64_t>(norm.tokens), static_cast<int64_t>(norm.hidden),
                      max_blocks, world_size, gpu::kFusedMaxAreas, norm.form, GpuBlockClusters());
}

// Blocks a cluster of the fused kernel's launch: a row's parts where the
// platform has clusters (one_shot_fused.cu), else 1. The kernels' compile
// time fact and the policy's run time one (ShapeFor) are one build flavour's.
int ClusterOf(const FusedLaunchShape& shape) {
  return platform::kBlockClusters && shape.parts > 1 ? shape.parts : 1;
}

// Blocks of the fused kernel's shape that stay resident at once on the
// current device (whole clusters).
StatusOr<int> ResidentBlocks(gpu::FusedKernelFn fn, const FusedLaunchShape& shape) {
  int clusters = 0;
  QR_GPU_RETURN_IF_ERROR(platform::ResidentClusters(
      fn, shape.threads, gpu::FusedSharedBytes(shape.threads, shape.parts, shape.chunks_per_thread),
      ClusterOf(shape), &clusters));
  if (clusters <= 0) return InternalError("fused kernel cannot be resident on this device");
  return clusters * ClusterOf(shape);
}

}  // namespace

FusedLaunchShape RankState::OneLaunchShape(const AllReduceRequest& request,
                                           const ResidualRmsNormRequest& norm) const {
  if (!norm.one_launch || request.algorithm != Algorithm::kOneShot || norm.tokens == 0) {
    return FusedLaunchShape{};
  }
  const FusedLaunchShape shape = ShapeFor(norm, impl_->config.max_blocks, impl_->config.world_size);
  const bool one = norm.one_launch_always
                       ? FusedOneLaunchFits(shape.slots)
                       : FusedOneLaunchPays(shape, static_cast<int64_t>(norm.tokens));
  return one ? shape : FusedLaunchShape{};
}

bool RankState::FusedOneLaunch(const AllReduceRequest& request,
                               const ResidualRmsNormRequest& norm) const {
  return FusedOneLaunchFits(OneLaunchShape(request, norm).slots);
}

Status RankState::LaunchFusedOneShot(const AllReduceRequest& request,
                                     const ResidualRmsNormRequest& norm,
                                     const FusedLaunchShape& shape,
                                     ::qr::gpu::Stream stream) const {
  const RankConfig& c = impl_->config;
  const FusedSlots& slots = shape.slots;
  if (slots.stride != impl_->params.oneshot_blocks) {
    return InternalError("fused one-shot: slot stride differs from the one-shot kernel's");
  }
  const gpu::FusedKernelFn fn = gpu::FusedOneShotKernelFor(request.format, c.world_size,
                                                           shape.parts, shape.chunks_per_thread);
  if (fn == nullptr) return InvalidArgumentError("unsupported dtype/world size");
  // The first launch of each block shape asks the runtime (which also loads
  // the kernel, before any of this rank's kernels waits for a peer;
  // rmsnorm_epilogue.h says why that matters).
  const int parts_index = shape.parts == 1 ? 0 : shape.parts == 2 ? 1 : shape.parts == 4 ? 2 : 3;
  const int per_index = shape.chunks_per_thread == 1 ? 0 : 1;
  std::atomic<int>& cached =
      impl_
          ->fused_cap[static_cast<int>(request.format)][parts_index][per_index][shape.threads / 32];
  int cap = cached.load(std::memory_order_relaxed);
  if (cap == 0) {
    QR_ASSIGN_OR_RETURN(cap, ResidentBlocks(fn, shape));
    cached.store(cap, std::memory_order_relaxed);
  }
  // Same-index blocks of the ranks wait on each other: all must be resident.
  if (slots.grid > cap) return InternalError("fused one-shot grid exceeds the resident blocks");
  gpu::FusedOneShotParams p{};
  p.base = impl_->params;
  p.base.in = static_cast<const char*>(request.in);
  p.base.out = static_cast<char*>(request.out);
  p.base.bytes = request.count * 2;
  p.base.num_tiles = 0;  // unused by one-shot kernels
  p.residual = static_cast<const char*>(norm.residual);
  p.weight = static_cast<const char*>(norm.weight);
  p.residual_out = static_cast<char*>(norm.residual_out);
  p.quant_out = static_cast<char*>(norm.quant_out);
  p.quant_scale = norm.quant_scale;
  p.tokens = norm.tokens;
  p.hidden = norm.hidden;
  p.eps = norm.eps;
  p.slot_rows = slots.rows;
  p.lanes = impl_->layout.fused_lanes;
  p.consts = FusedLaunchConstsOf(slots, static_cast<int64_t>(norm.tokens));
  QR_GPU_RETURN_IF_ERROR(platform::LaunchKernelShared(
      fn, dim3(slots.grid), dim3(shape.threads),
      gpu::FusedSharedBytes(shape.threads, shape.parts, shape.chunks_per_thread),
      static_cast<hipStream_t>(stream), impl_->overlap, p, ClusterOf(shape)));
  return OkStatus();
}

Status RankState::LaunchResidualRmsNorm(const AllReduceRequest& request,
                                        const ResidualRmsNormRequest& norm,
                                        ::qr::gpu::Stream stream) const {
  if (request.out != norm.norm_out || request.count != norm.tokens * norm.hidden ||
      WorkFormatDType(request.format) != norm.dtype) {
    return InvalidArgumentError(
        "residual RMSNorm: the epilogue's norm_out, tokens x hidden and dtype must be the "
        "all-reduce's out, count and dtype");
  }
  if (norm.tokens == 0) return OkStatus();
  if (norm.hidden == 0 || norm.hidden % kRmsNormChunkElems != 0 || norm.weight == nullptr ||
      norm.residual_out == nullptr) {
    return InvalidArgumentError("residual RMSNorm: hidden " + std::to_string(norm.hidden) +
                                " not a positive multiple of 8, or a null buffer");
  }
  QR_RETURN_IF_ERROR(ValidateResidualRmsNorm(norm));
  QR_RETURN_IF_ERROR(ValidateAllReduceRequest(request, impl_->config.world_size));
  if (const FusedLaunchShape shape = OneLaunchShape(request, norm);
      FusedOneLaunchFits(shape.slots)) {
    return LaunchFusedOneShot(request, norm, shape, stream);
  }
  // Before the all-reduce: loading the epilogue after it could wait for it
  // (LoadResidualRmsNormEpilogue says why).
  QR_RETURN_IF_ERROR(LoadResidualRmsNormEpilogue());
  if (SplitRows(request, norm)) return LaunchSplitRows(request, norm, stream);
  QR_RETURN_IF_ERROR(Launch(request, stream));
  return LaunchResidualRmsNormEpilogue(norm, stream, impl_->overlap);
}

}  // namespace qr::kernels
