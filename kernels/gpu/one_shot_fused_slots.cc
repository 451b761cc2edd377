#include "kernels/gpu/one_shot_fused_slots.h"

#include <algorithm>

#include "kernels/geometry.h"

namespace qr::kernels {

FusedSlots FusedOneShotSlots(int64_t tokens, int64_t hidden, int max_blocks, int ws, int max_areas,
                             int max_grid, int parts) {
  FusedSlots s;
  if (tokens <= 0 || hidden <= 0 || hidden % 8 != 0 || max_blocks <= 0 || ws <= 0 ||
      max_grid <= 0 || parts <= 0 || (parts > 1 && FusedThreads(hidden, parts) == 0)) {
    return s;
  }
  if (tokens * hidden * 2 > OneShotMaxBytes(ws)) return s;
  if (parts > 1 && tokens * parts > kFusedLaneInboxes) return s;
  s.rows = static_cast<int>(OneShotMaxBytes(ws) / (int64_t{kFusedSlotRowAtoms} * 16));
  // OneShotStrideBlocks (kernels/gpu/two_shot_device.cuh): the same formula.
  s.stride = std::min(s.rows, max_blocks);
  s.parts = parts;
  // Whole row groups of `parts` blocks.
  s.grid = static_cast<int>(std::min<int64_t>(std::min(s.stride, max_grid), tokens * parts)) /
           parts * parts;
  const bool fits = [&] {
    if (s.grid == 0 || FusedBlockAreas(s, 0) > max_areas) return false;
    for (int b = 0; b < s.grid; ++b) {
      if (FusedBlockNeed(tokens, hidden, s, b) > FusedBlockRows(s, b)) return false;
    }
    return true;
  }();
  if (!fits) s.grid = 0;
  return s;
}

FusedLaunchShape FusedShapeOf(int64_t tokens, int64_t hidden, int max_blocks, int ws, int max_areas,
                              FusedRowForm form, bool clusters) {
  FusedLaunchShape shape;
  if (tokens <= 0 || hidden <= 0 || hidden % 8 != 0) return shape;
  int split = FusedRowParts(hidden);
  bool one_row_each = split > 0 &&
                      tokens * split <= FusedMaxGrid(max_blocks, FusedThreads(hidden, split)) &&
                      (split == 1 || tokens * split <= kFusedLaneInboxes);
  if (const int fine = clusters ? FusedClusterParts(tokens, hidden, max_blocks) : 0; fine > 0) {
    split = fine;
    one_row_each = true;
  }
  if (form == FusedRowForm::kPolicy) {
    form = one_row_each || FusedLaneThreads(hidden) == 0 ? FusedRowForm::kChunkThreads
                                                         : FusedRowForm::kLaneThreads;
  }
  if (form == FusedRowForm::kLaneThreads) {
    shape.threads = FusedLaneThreads(hidden);
    if (shape.threads == 0) return shape;
    shape.parts = 1;
    shape.chunks_per_thread = kFusedLaneChunks;
  } else {
    shape.parts = one_row_each ? split : FusedFewestParts(hidden);
    if (shape.parts == 0) return shape;
    shape.threads = FusedThreads(hidden, shape.parts);
  }
  shape.slots = FusedOneShotSlots(tokens, hidden, max_blocks, ws, max_areas,
                                  FusedMaxGrid(max_blocks, shape.threads), shape.parts);
  return shape;
}

}  // namespace qr::kernels
