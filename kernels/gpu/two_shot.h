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
// buffer stays under 100 MiB (H200: 132 x 4 = 528 blocks, 83 MiB with the
// fused kernel's lane inboxes).
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

// ---------------------------------------------------------------------------
// Two families of two-shot kernels share the slots (kernels/gpu/two_shot.cu).
//
// Flag family (FP, INT6, INT3): per block two rows of slots (tile parity)
// per phase, and a colour flag per (row, source) that the sender raises
// after a block barrier and a system fence.
//
// Data-flag family (INT4, INT8): their wire never holds a zero 32-bit code
// word and every scale half-word carries kScaleWireFlag (bit 15), which
// kernels:wire_flag_premise_test checks over the reference's wire bytes. So a
// slot that the receiver zeroed after reading it is empty, and a word that
// reads non-zero (a scale half with bit 15) is the sender's whole word: the
// data is its own flag. Each warp polls exactly the words it decodes, and
// synchronisation is per warp, with no block barrier or system fence on the
// critical path. The same two rows' bytes of each block hold a ring of
// kDataFlagRingRows rows per phase (tile colour c uses row c % R); a row is
// written again R tiles later, guarded by credits: after a warp has cleared
// both phases of tile c it publishes c (fence, then a relaxed store) into a
// credit word per (block, warp, granting rank) in every peer's buffer, and a
// sender warp writes tile c only once every peer's credit reached c - R.
//
// Codec changes. The families (and the codecs of the data-flag family)
// share the slot bytes with different geometry, and only the data-flag
// family needs zeroed slots. Each block keeps the codec of the last two-shot
// call it ran in a state word; every rank runs the same calls with the same
// grid, so a block's own word says what the same block of every peer ran
// last. A block whose call changes family, or changes codec within the
// data-flag family (the first call counts: the word starts at "none"),
// first runs a handshake:
//   1. a data-flag call zeroes this block's ring rows of both phases in its
//      own buffer;
//   2. __syncthreads(); one thread fences (system scope) and stores the
//      handshake colour H = colours[block] + 1 into every peer's credit words
//      for this block (every warp);
//   3. waits (bounded) until every peer's credit words for this block hold
//      H (acquire), __syncthreads(), records the codec, and starts its tiles
//      at colour H + 1.
// Why that is enough: a peer stores H only after its previous call of this
// block ended (all its reads and clears of its own buffer, in the old
// geometry, are done) and after it zeroed its rows (step 1); the fence
// orders those accesses before the credit, and my acquire of H orders them
// before my first write into that peer's buffer. H is new (every credit or
// colour used so far is at most colours[block] < H), so a stale credit of an
// earlier call cannot pass for it; and no peer's credit to me can move past H
// before I send it tile H + 1. After the handshake every credit is H, which
// lets the first R tiles of a data-flag call pass their credit waits.
// A change between two flag-family codecs needs no handshake: their rows
// are the same bytes and the tile-parity argument (two_shot.cu) holds across
// calls whatever a row holds. The same codec as last time: no handshake.
//
// Built in only with `--define qr_two_shot_sync=data_flag` (kernels/gpu/BUILD).
// On one H200 it was bit-exact but no faster where the ranks share the GPU
// and its SM-side cost was higher (docs/performance.md, "Data as its own
// flag"); what it is for, taking the system fence off the NVLink critical
// path, needs two GPUs to measure (issue 20). Until then INT4 and INT8 take
// the block flags like every other codec.
#if defined(QR_TWO_SHOT_DATA_FLAG)
inline constexpr bool kDataFlagBuild = true;
#else
inline constexpr bool kDataFlagBuild = false;
#endif
// Whether `c` can be its own flag (wire v2: INT4 and INT8 words are never zero).
inline constexpr bool CanBeItsOwnFlag(Codec c) { return c == Codec::kInt4 || c == Codec::kInt8; }
// Whether this build's kernels of `c` use data as its own flag.
inline constexpr bool UsesDataFlags(Codec c) { return kDataFlagBuild && CanBeItsOwnFlag(c); }
// "data_flag" or "flags": how this build's INT4/INT8 kernels synchronise.
const char* TwoShotSyncName();

// Bytes of one block's slots per phase (two rows of kTileSlotBytes).
inline constexpr int64_t kTwoShotBlockPhaseBytes = 2 * kTileSlotBytes;
// One data-flag ring row: a shard slot per peer (source s at slot s, or
// s - 1 above my rank; my own shard stays in registers).
constexpr int64_t DataFlagRowBytes(Codec c, int ws) { return (ws - 1) * ShardWireBytes(c, ws); }
// Source s's slot inside a row of rank `me`'s ring.
constexpr int DataFlagSourceSlot(int s, int me) { return s < me ? s : s - 1; }
// Rows of the ring, the same for both codecs and every world size: at least
// 3, so that a sender that sends tile c + 1 early waits for the credit of
// tile c + 1 - R <= c - 2, which every peer released a whole tile before;
// a power of two, so that row c % R stays periodic when the 32-bit colours
// wrap.
inline constexpr int kDataFlagRingRows = 4;
constexpr bool DataFlagRingFits(Codec c, int ws) {
  return kDataFlagRingRows * DataFlagRowBytes(c, ws) <= kTwoShotBlockPhaseBytes;
}
static_assert(DataFlagRingFits(Codec::kInt8, 2) && DataFlagRingFits(Codec::kInt8, 4) &&
                  DataFlagRingFits(Codec::kInt8, 8) && DataFlagRingFits(Codec::kInt4, 8),
              "a block's two rows of slots hold the ring");
// Credit words per block: one per warp of kTwoShotThreads threads on a
// 32-lane machine (AMD's 64-lane wavefronts use the first half).
inline constexpr int kTwoShotLayoutWarps = kTwoShotThreads / 32;
// The value a block's codec state word holds: 0 = no two-shot call yet.
constexpr uint32_t CodecStateWord(Codec c) { return static_cast<uint32_t>(c) + 1; }

// Offsets inside one rank's receive buffer.
struct TwoShotLayout {
  int max_blocks = 0;
  // Rows: [max_blocks][2] (block, tile parity).
  size_t flags1 = 0;  // uint32 [rows][kMaxWorldSize]: phase-1 colour from each source rank
  size_t flags2 = 0;  // same for phase 2
  size_t data1 = 0;   // [rows][kTileSlotBytes]; the data-flag ring of block b at b * 2 rows
  size_t data2 = 0;
  size_t oneshot = 0;  // [2 phases][kOneShotRegionBytes], zero = empty
  // uint32 [max_blocks][kTwoShotLayoutWarps][kMaxWorldSize]: in the SENDER's
  // buffer, the last tile colour the granting rank cleared (data-flag family).
  size_t credits = 0;
  // float [token row][part][256] (kFusedLaneInboxes of
  // kFusedLaneInboxBytes, one_shot_fused_slots.h): the fused kernel's
  // lane sums, written by each part of a token row into every other part's
  // inbox in its own rank's buffer (kernels/gpu/one_shot_fused.cu), zero =
  // empty, each read and zeroed once in a call.
  size_t fused_lanes = 0;
  size_t total = 0;  // bytes to allocate (zeroed once before first use)
};
TwoShotLayout MakeTwoShotLayout(int max_blocks);

// Words of device state a rank needs: [0, max_blocks) the two-shot colours,
// [max_blocks] the device error flag, [max_blocks + 1, 2 max_blocks + 1) the
// one-shot blocks' call counts (one per block of its fixed stride, which is
// at most max_blocks; kernels/gpu/one_shot.cu), [2 max_blocks + 1, 3
// max_blocks + 1) each two-shot block's CodecStateWord of its last call,
// [3 max_blocks + 1] the wall clock's low 32 bits when the rank last read
// the group's abort word (two_shot_device.cuh, AbortRaised).
constexpr size_t TwoShotStateWords(int max_blocks) {
  return 3 * static_cast<size_t>(max_blocks) + 2;
}

// The least time between two reads of the group's abort word (host memory)
// by one rank's kernels: how late an abort may be seen, on top of a wait's
// check spacing (two_shot_device.cuh, AbortRaised).
inline constexpr int64_t kAbortReadPeriodUs = 20;

// Grid for a call of `bytes` (tiles, capped); the same on every rank.
int TwoShotGrid(size_t bytes, int max_blocks);

// "" for the real kernels; else the timing variant this binary was built as
// ("no_waits", "no_fences", "bare": `--define qr_two_shot_variant=...`),
// whose two-shot results are wrong (kernels/gpu/two_shot_device.cuh).
const char* TwoShotTimingVariant();

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_TWO_SHOT_H_
