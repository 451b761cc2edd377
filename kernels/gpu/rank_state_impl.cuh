// RankState's state (rank_state.h), shared by its two translation units:
// rank_state.cu (the all-reduce) and rank_state_fused.cu (the fused
// collective). Device-side header: include from those .cu files only.
#ifndef QR_KERNELS_GPU_RANK_STATE_IMPL_CUH_
#define QR_KERNELS_GPU_RANK_STATE_IMPL_CUH_

#include <atomic>

#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/types.h"

namespace qr::kernels {

// One cached grid cap per kernel a rank can launch: the one-shot all-reduce,
// reduce-scatter and all-gather kernels of each work format, then the
// two-shot, reduce-scatter and all-gather phase kernels of each (format,
// codec).
inline constexpr int kKernelSlots = 3 * kNumWorkFormats + 3 * kNumWorkFormats * kNumCodecs;

struct RankState::Impl {
  RankConfig config;
  TwoShotLayout layout;
  gpu::KernelParams params;  // the template every launch copies
  // Launch with programmatic overlap of the previous kernel
  // (RankConfig::programmatic_launch, resolved at Create).
  bool overlap = false;
  // ResidentGridCap per KernelSlot, 0 until the first launch of that kernel.
  // Racing first launches compute the same value.
  mutable std::atomic<int> grid_cap[kKernelSlots] = {};
  // The same for the fused one-shot kernel of each work format, parts of a
  // row (1, 2, 4, 8), chunks a thread (1 or kFusedLaneChunks) and block
  // size (a multiple of 32 threads).
  mutable std::atomic<int> fused_cap[kNumWorkFormats][4][2][kFusedMaxThreads / 32 + 1] = {};
};

// RankState::Launch's checks of a request (kInvalidArgument), before
// anything is enqueued.
Status ValidateAllReduceRequest(const AllReduceRequest& r, int world_size);

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_RANK_STATE_IMPL_CUH_
