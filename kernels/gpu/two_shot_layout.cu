// The host side of two_shot.h: the receive buffer's layout, the grid of a
// call, and what this build's kernels are (sync family, timing variant).
#include <hip/hip_runtime.h>

#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels {

TwoShotLayout MakeTwoShotLayout(int max_blocks) {
  constexpr size_t kPage = 4096;
  auto round_up = [](size_t x) { return (x + kPage - 1) / kPage * kPage; };
  TwoShotLayout l;
  l.max_blocks = max_blocks;
  // Two rows (tile parity) of flags and slots per block.
  const size_t rows = 2 * static_cast<size_t>(max_blocks);
  const size_t flag_bytes = round_up(rows * kMaxWorldSize * 4);
  l.flags1 = 0;
  l.flags2 = flag_bytes;
  l.data1 = 2 * flag_bytes;
  l.data2 = l.data1 + rows * kTileSlotBytes;
  l.oneshot = l.data2 + rows * kTileSlotBytes;
  l.credits = l.oneshot + 2 * kOneShotRegionBytes;
  l.fused_lanes = l.credits + round_up(static_cast<size_t>(max_blocks) * kTwoShotLayoutWarps *
                                       kMaxWorldSize * 4);
  l.total = l.fused_lanes + round_up(static_cast<size_t>(kFusedLaneInboxes * kFusedLaneInboxBytes));
  return l;
}

int TwoShotGrid(size_t bytes, int max_blocks) {
  const size_t tiles = (bytes + kTileBytes - 1) / kTileBytes;
  return static_cast<int>(tiles < static_cast<size_t>(max_blocks) ? tiles : max_blocks);
}

const char* TwoShotSyncName() { return kDataFlagBuild ? "data_flag" : "flags"; }

const char* TwoShotTimingVariant() {
  if (gpu::kVariantSkipsWaits && gpu::kVariantSkipsFences) return "bare";
  if (gpu::kVariantSkipsWaits) return "no_waits";
  if (gpu::kVariantSkipsFences) return "no_fences";
  return "";
}
}  // namespace qr::kernels
