// The lane sums of a row's RMSNorm between the blocks that share the row
// where they are not a cluster (AMD; on NVIDIA they exchange through each
// other's shared memory, one_shot_fused.cu), and the reference's pairwise
// tree over them (kernels/rmsnorm_reference.h): the part of the fused
// kernel after each block has its own lanes' sums of squares.
#ifndef QR_KERNELS_GPU_FUSED_LANES_CUH_
#define QR_KERNELS_GPU_FUSED_LANES_CUH_

#include <cstdint>

#include "kernels/gpu/one_shot_device.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/device_macros.h"
#include "kernels/platform/math.cuh"
#include "kernels/rmsnorm_lanes.h"

namespace qr::kernels::gpu {

// Lane sums a thread of the tree's warp holds: lane i + k W for k below this.
inline constexpr int kLaneTreePer = kRmsNormLanes / platform::kWarpSize;
static_assert(kRmsNormLanes % platform::kWarpSize == 0,
              "a warp's lanes cover the tree's lower levels");

// A lane sum between the parts of a row: NOT of its bits, never zero (the
// all-ones NaN becomes another NaN first), so zero marks an empty word.
QR_DEVICE_INLINE uint32_t LaneToWire(float v) {
  const uint32_t b = __float_as_uint(v);
  return ~(b == 0xFFFFFFFFu ? 0xFFFFFFFEu : b);
}

// Waits for the inbox words of a tree thread's lanes that come from the
// row's other parts (theirs[k]: word i0 + k W, whose first load is raw[k]),
// polling again for every word still zero at once (one round trip a poll;
// polling them one after the other cost a round trip a word), then zeroes
// them. False when the wait gave up (the sticky error is set). The timing
// variants that skip the waits on peers wait here too: the words come from
// other parts of this rank's own grid, so rank 0 timed alone still pays the
// exchange between parts (skipping it left the exchange out of split rows'
// alone cost).
template <int kN>
QR_DEVICE_INLINE bool ReceiveLanes(uint32_t* inbox, unsigned i0, const bool (&theirs)[kN],
                                   uint32_t (&raw)[kN], const KernelParams& p) {
  auto missing = [&] {
    bool m = false;
#pragma unroll
    for (int k = 0; k < kN; ++k) m = m || (theirs[k] && raw[k] == 0);
    return m;
  };
  if (missing()) {
    const uint64_t start = platform::WallClock();
    for (uint32_t spins = 1;; ++spins) {
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        if (theirs[k] && raw[k] == 0) {
          raw[k] = platform::LoadShared32(inbox + i0 + k * platform::kWarpSize);
        }
      }
      if (!missing()) break;
      if ((spins & 63u) == 0 && ShouldGiveUp(start, p)) return false;
      if (spins > kOneShotSpinPolls) platform::PollPause();
    }
  }
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (theirs[k]) platform::StoreRemote32(inbox + i0 + k * platform::kWarpSize, 0);
  }
  return true;
}

// The reference's pairwise tree over the 256 lane sums (lanes[j] +=
// lanes[j + s] for j < s, s = 128 .. 1), computed by one warp whose lane i
// holds v[k] = lane sum i + k W: the levels s >= W add registers, the levels
// below take lane i + s by a shuffle. Lane 0 returns the root.
QR_DEVICE_INLINE float LaneTree(float (&v)[kLaneTreePer]) {
  const int i = static_cast<int>(threadIdx.x) % platform::kWarpSize;
#pragma unroll
  for (int n = kLaneTreePer / 2; n >= 1; n /= 2) {
#pragma unroll
    for (int k = 0; k < n; ++k) v[k] = platform::AddRn(v[k], v[k + n]);
  }
  float root = v[0];
#pragma unroll
  for (int s = platform::kWarpSize / 2; s >= 1; s /= 2) {
    const float other =
        __uint_as_float(platform::ShuffleU32(__float_as_uint(root), i + s, platform::kWarpSize));
    root = platform::AddRn(root, other);
  }
  return root;
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_FUSED_LANES_CUH_
