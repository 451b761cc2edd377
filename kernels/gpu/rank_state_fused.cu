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
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/launch.cuh"
#include "kernels/rmsnorm_lanes.h"
#include "kernels/types.h"

namespace qr::kernels {
namespace {

FusedSlots SlotsFor(const ResidualRmsNormRequest& norm, int max_blocks, int world_size) {
  const int64_t hidden = static_cast<int64_t>(norm.hidden);
  return FusedOneShotSlots(static_cast<int64_t>(norm.tokens), hidden, max_blocks, world_size,
                           gpu::kFusedMaxAreas, FusedMaxGrid(max_blocks, FusedBlockThreads(hidden)));
}

// Blocks of `threads` threads of the fused kernel that stay resident at once
// on the current device.
StatusOr<int> ResidentBlocks(gpu::FusedKernelFn fn, int threads) {
  int device = 0;
  int per_sm = 0;
  int sms = 0;
  QR_GPU_RETURN_IF_ERROR(hipGetDevice(&device));
  QR_GPU_RETURN_IF_ERROR(hipOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(fn), threads, gpu::FusedSquaresBytes(threads)));
  QR_GPU_RETURN_IF_ERROR(
      hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device));
  if (per_sm <= 0) return InternalError("fused kernel cannot be resident on this device");
  return per_sm * sms;
}

}  // namespace

bool RankState::FusedOneLaunch(const AllReduceRequest& request,
                               const ResidualRmsNormRequest& norm) const {
  if (!norm.one_launch || request.algorithm != Algorithm::kOneShot || norm.tokens == 0) {
    return false;
  }
  const FusedSlots slots = SlotsFor(norm, impl_->config.max_blocks, impl_->config.world_size);
  const int64_t hidden = static_cast<int64_t>(norm.hidden);
  return norm.one_launch_always
             ? FusedOneLaunchFits(slots, hidden)
             : FusedOneLaunchPays(slots, static_cast<int64_t>(norm.tokens), hidden);
}

Status RankState::LaunchFusedOneShot(const AllReduceRequest& request,
                                     const ResidualRmsNormRequest& norm,
                                     ::qr::gpu::Stream stream) const {
  const RankConfig& c = impl_->config;
  const FusedSlots slots = SlotsFor(norm, c.max_blocks, c.world_size);
  if (slots.stride != impl_->params.oneshot_blocks) {
    return InternalError("fused one-shot: slot stride differs from the one-shot kernel's");
  }
  const gpu::FusedKernelFn fn = gpu::FusedOneShotKernelFor(request.format, c.world_size);
  if (fn == nullptr) return InvalidArgumentError("unsupported dtype/world size");
  // The first launch asks the runtime (which also loads the kernel, before
  // any of this rank's kernels waits for a peer; rmsnorm_epilogue.h says
  // why that matters).
  const int threads = FusedBlockThreads(static_cast<int64_t>(norm.hidden));
  std::atomic<int>& cached =
      impl_->fused_cap[static_cast<int>(request.format)][threads / kRmsNormLanes - 1];
  int cap = cached.load(std::memory_order_relaxed);
  if (cap == 0) {
    QR_ASSIGN_OR_RETURN(cap, ResidentBlocks(fn, threads));
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
  p.tokens = norm.tokens;
  p.hidden = norm.hidden;
  p.eps = norm.eps;
  p.slot_rows = slots.rows;
  QR_GPU_RETURN_IF_ERROR(platform::LaunchKernelShared(fn, dim3(slots.grid), dim3(threads),
                                                      gpu::FusedSquaresBytes(threads),
                                                      static_cast<hipStream_t>(stream),
                                                      impl_->overlap, p));
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
  if (FusedOneLaunch(request, norm)) return LaunchFusedOneShot(request, norm, stream);
  // Before the all-reduce: loading the epilogue after it could wait for it
  // (LoadResidualRmsNormEpilogue says why).
  QR_RETURN_IF_ERROR(LoadResidualRmsNormEpilogue());
  if (SplitRows(request, norm)) return LaunchSplitRows(request, norm, stream);
  QR_RETURN_IF_ERROR(Launch(request, stream));
  return LaunchResidualRmsNormEpilogue(norm, stream, impl_->overlap);
}

}  // namespace qr::kernels
