// Where the one-launch fused one-shot kernel (kernels/gpu/one_shot_fused.cu)
// puts its atoms in the one-shot receive region, and whether a call fits.
// Pure integer functions, compiled by g++ (host tests) and the GPU compilers
// alike, so that a host test checks the mapping the device uses.
//
// The one-shot region of each source holds R slot rows of kOneShotThreads
// 16-byte atoms (R = OneShotMaxBytes(ws) / 4096). The plain one-shot kernel
// gives row x to "area" x % S (S = OneShotStrideBlocks: block b of the plain
// kernel owns area b, rows b, b + S, b + 2S, ...), and area b's call count
// p.oneshot_counter[b] picks the phase of its rows (one_shot.cu says why a
// fixed row -> area map and counts in step on every rank make the
// zero-after-read region safe).
//
// The fused kernel keeps that map and those counts. Its grid has G = min(S,
// tokens, max_grid) blocks; block B owns token rows B, B + G, B + 2G, ... and areas B,
// B + G, B + 2G, ... (< S), and lays the atoms of its token rows out, in
// order, over its areas' rows: local atom j (token row i of the block's,
// chunk c: j = i * hidden / 8 + c) goes to the block's local slot row
// q = j / 256, column j % 256; local rows fill area after area (area m of
// the block takes local rows [m * L_m ...), L_m being that area's rows). A
// block advances the count of every area it puts atoms in, and reads the
// phase of each from that count. So every slot row still belongs to one
// area, every area is advanced by exactly one block of a call (the same on
// every rank), and whichever kernel uses an area next finds its count in
// step with the peers'.
#ifndef QR_KERNELS_GPU_ONE_SHOT_FUSED_SLOTS_H_
#define QR_KERNELS_GPU_ONE_SHOT_FUSED_SLOTS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/platform/host_device.h"
#include "kernels/rmsnorm_lanes.h"

namespace qr::kernels {

// Atoms per slot row (the one-shot kernel's threads, 256).
inline constexpr int kFusedSlotRowAtoms = 256;

struct FusedSlots {
  int rows = 0;    // R: slot rows per source in one phase
  int stride = 0;  // S: areas (the plain one-shot kernel's stride)
  int grid = 0;    // G: blocks of the fused kernel
};

// Slot rows of area b: rows b, b + S, ... below R.
QR_HOST_DEVICE inline int FusedAreaRows(const FusedSlots& s, int area) {
  return (s.rows - area + s.stride - 1) / s.stride;
}

// Areas of block B: B, B + G, ... below S.
QR_HOST_DEVICE inline int FusedBlockAreas(const FusedSlots& s, int block) {
  return (s.stride - block + s.grid - 1) / s.grid;
}

// Areas of block B that have the most rows, ceil(R / S); they come first
// (area b has the most rows exactly when b < R - (ceil(R / S) - 1) * S).
QR_HOST_DEVICE inline int FusedBlockLongAreas(const FusedSlots& s, int block) {
  const int most = (s.rows + s.stride - 1) / s.stride;
  const int long_below = s.rows - (most - 1) * s.stride;  // in (0, S]
  if (long_below <= block) return 0;
  return (long_below - block + s.grid - 1) / s.grid;
}

// Local slot rows block B has: the sum of its areas' rows.
QR_HOST_DEVICE inline int64_t FusedBlockRows(const FusedSlots& s, int block) {
  const int most = (s.rows + s.stride - 1) / s.stride;
  const int areas = FusedBlockAreas(s, block);
  const int long_areas = FusedBlockLongAreas(s, block);
  return int64_t{long_areas} * most + int64_t{areas - long_areas} * (most - 1);
}

// Local slot row q of block B (q < FusedBlockRows): its area index m (the
// block's m-th area, B + m * G) and the row in the source's region.
struct FusedSlotRow {
  int area_index;
  int row;
};
QR_HOST_DEVICE inline FusedSlotRow FusedLocalRow(const FusedSlots& s, int block, int64_t q) {
  const int most = (s.rows + s.stride - 1) / s.stride;
  const int long_areas = FusedBlockLongAreas(s, block);
  const int64_t long_rows = int64_t{long_areas} * most;
  int m = 0;
  int k = 0;
  if (q < long_rows) {
    m = static_cast<int>(q / most);
    k = static_cast<int>(q % most);
  } else {
    const int64_t rest = q - long_rows;
    m = long_areas + static_cast<int>(rest / (most - 1));
    k = static_cast<int>(rest % (most - 1));
  }
  const int area = block + m * s.grid;
  return FusedSlotRow{m, area + k * s.stride};
}

// Token rows of block B: B, B + G, ... below tokens.
QR_HOST_DEVICE inline int64_t FusedBlockTokens(int64_t tokens, int grid, int block) {
  return (tokens - block + grid - 1) / grid;
}

// Local slot rows block B needs for its token rows.
QR_HOST_DEVICE inline int64_t FusedBlockNeed(int64_t tokens, int64_t hidden, int grid, int block) {
  const int64_t atoms = FusedBlockTokens(tokens, grid, block) * (hidden / 8);
  return (atoms + kFusedSlotRowAtoms - 1) / kFusedSlotRowAtoms;
}

// Threads of a fused block for rows of `hidden` values: one per 16-byte
// chunk of a row, rounded up to whole lane sets (the sum of squares'
// lanes, kernels/rmsnorm_lanes.h), at most kFusedMaxThreads. So up to 8192 values a row, a
// thread receives one chunk and every wait of the row overlaps the others';
// 256 threads walking four chunks each paid four waits one after another
// (docs/fused.md, "The one-launch kernel").
inline constexpr int kFusedMaxThreads = 1024;
QR_HOST_DEVICE inline int FusedBlockThreads(int64_t hidden) {
  const int64_t chunks = hidden / 8;
  const int64_t lanes = (chunks + kRmsNormLanes - 1) / kRmsNormLanes * kRmsNormLanes;
  return static_cast<int>(lanes < kRmsNormLanes      ? kRmsNormLanes
                          : lanes > kFusedMaxThreads ? kFusedMaxThreads
                                                     : lanes);
}

// Blocks of the fused kernel a rank may launch so that every rank's blocks
// are resident at once: the kernel keeps one block of kFusedMaxThreads per
// multiprocessor (its __launch_bounds__), and max_blocks is at most four per
// multiprocessor (kTwoShotBlocksPerSm, one GPU per rank) or the rank's share
// of two per multiprocessor (ranks sharing a GPU, max_blocks_shared.h), so a
// quarter of it never asks for more multiprocessors than the rank has.
QR_HOST_DEVICE inline int FusedMaxGrid(int max_blocks) {
  return max_blocks / 4 > 1 ? max_blocks / 4 : 1;
}

// The fused kernel's slots for a call of tokens x hidden at world size ws
// whose layout has max_blocks blocks, with at most max_grid blocks, or grid
// 0 when the call does not fit (some block's token rows need more slot rows
// than its areas hold, or the areas exceed max_areas, the count a block can
// keep in shared memory). The same on every rank. hidden: a positive
// multiple of 8; tokens > 0.
FusedSlots FusedOneShotSlots(int64_t tokens, int64_t hidden, int max_blocks, int ws, int max_areas,
                             int max_grid);

// Whether the fused request runs as one launch: the call fits, every block
// has one token row at most, and rows of at most 4096 values (512 threads a
// block). Measured on one H200 (ws 2, every rank on it, graph-captured,
// docs/performance.md "Fused all-reduce + RMSNorm"): a block's rows run one
// after another, so 64 rows on 33 blocks took 1.3x and 256 rows 2.6x the
// two launches; one row of 4096 values a block took 0.96-1.05x of them, one
// row of 8192 (1024 threads) 1.03-1.16x.
inline constexpr int kFusedOneLaunchMaxThreads = 512;
QR_HOST_DEVICE inline bool FusedOneLaunchPays(const FusedSlots& s, int64_t tokens, int64_t hidden) {
  return s.grid > 0 && tokens <= s.grid && FusedBlockThreads(hidden) <= kFusedOneLaunchMaxThreads;
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_ONE_SHOT_FUSED_SLOTS_H_
