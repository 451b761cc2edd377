// The all-reduce kernels on GPUs: their tuning constants, buffer layout and
// grid, for host code (no HIP types). kernels/gpu/rank_state.h launches them.
//
// Each rank owns one receive buffer (MallocShared, shared with peers through
// IPC) laid out by TwoShotLayout: two flag arrays and two data phases, each a
// fixed array of per-block slots. Offsets depend only on max_blocks, never on
// the message size, so consecutive calls of different sizes never alias (the
// vLLM TP4/TP8 hang). Per-block colours live in device memory (the state
// words) and are advanced by the kernel, so a captured graph can be replayed
// any number of times.
#ifndef QR_KERNELS_GPU_TWO_SHOT_H_
#define QR_KERNELS_GPU_TWO_SHOT_H_

#include <cstddef>
#include <cstdint>

#include "common/limits.h"
#include "kernels/codec_layout.h"
#include "kernels/geometry.h"
#include "kernels/types.h"

namespace qr::kernels {

// Threads per block: one per atom of an atom row (kernels/codec_layout.h),
// so thread t handles atom t of every row.
inline constexpr int kTwoShotThreads = kAtomRowAtoms;
// 16-byte atoms per thread per tile (kernels/geometry.h): 8.
inline constexpr int kTwoShotAtoms =
    static_cast<int>(kTileBytes / (int64_t{kTwoShotThreads} * kAtomBytes));
// Blocks per multiprocessor the layout has slots for. A launch uses at most
// as many blocks as stay resident for its kernel (occupancy query), so a
// kernel that fits fewer per multiprocessor never waits on a block that
// cannot start. Four resident blocks (32 warps) hide more of the integer
// codecs' latency than three (docs/performance.md, "Blocks per
// multiprocessor").
inline constexpr int kTwoShotBlocksPerSm = 4;
// The layout's blocks at most, whatever the multiprocessor count, so that the
// buffer stays under 100 MiB (H200: 132 x 4 = 528 blocks, 82 MiB).
inline constexpr int kTwoShotMaxLayoutBlocks = 608;
// Blocks per multiprocessor every integer-codec two-shot kernel is compiled
// to fit (__launch_bounds__: at most 64 registers per thread; none spills).
inline constexpr int kTwoShotMinBlocksPerSm = 4;
// Blocks per multiprocessor the FP codec's two-shot launches use at most; its
// kernels are compiled for that many (up to 128 registers per thread, which
// hold the next tile's input while the current tile is in flight).
inline constexpr int kTwoShotFpBlocksPerSm = 2;
// Values the kernel writes into the error word when it gives up.
inline constexpr uint32_t kGpuErrorNone = 0;
inline constexpr uint32_t kGpuErrorAborted = 1;  // the group's abort word was raised
inline constexpr uint32_t kGpuErrorTimeout = 2;  // a wait ran past timeout

// Offsets inside one rank's receive buffer.
struct TwoShotLayout {
  int max_blocks = 0;
  // Rows: [max_blocks][2] (block, tile parity).
  size_t flags1 = 0;  // uint32 [rows][kMaxWorldSize]: phase-1 colour from each source rank
  size_t flags2 = 0;  // same for phase 2
  size_t data1 = 0;   // [rows][kTileSlotBytes]
  size_t data2 = 0;
  size_t oneshot = 0;  // [2 phases][kOneShotRegionBytes], zero = empty
  size_t total = 0;    // bytes to allocate (zeroed once before first use)
};
TwoShotLayout MakeTwoShotLayout(int max_blocks);

// Words of device state a rank needs: [0, max_blocks) the two-shot colours,
// [max_blocks] the device error flag, [max_blocks + 1, 2 max_blocks + 1) the
// one-shot blocks' call counts (one per block of its fixed stride, which is
// at most max_blocks; kernels/gpu/one_shot.cu).
constexpr size_t TwoShotStateWords(int max_blocks) {
  return 2 * static_cast<size_t>(max_blocks) + 1;
}

// Grid for a call of `bytes` (tiles, capped); the same on every rank.
int TwoShotGrid(size_t bytes, int max_blocks);

// "" for the real kernels; else the timing variant this binary was built as
// ("no_waits", "no_fences", "bare": `--define qr_two_shot_variant=...`),
// whose two-shot results are wrong (kernels/gpu/two_shot_device.cuh).
const char* TwoShotTimingVariant();

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_TWO_SHOT_H_
