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

#include "kernels/geometry.h"
#include "kernels/platform/host_device.h"
#include "kernels/rmsnorm_lanes.h"

namespace qr::kernels {

// Atoms per slot row (the one-shot kernel's threads, 256).
inline constexpr int kFusedSlotRowAtoms = 256;

struct FusedSlots {
  int rows = 0;    // R: slot rows per source in one phase
  int stride = 0;  // S: areas (the plain one-shot kernel's stride)
  int grid = 0;    // G: blocks of the fused kernel, a multiple of parts
  int parts = 1;   // P: blocks sharing each token row (FusedRowParts)
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

// What every block of a launch derives from the slots and the call, with
// the divisions done once on the host (the kernel's blocks each spent about
// a fifth of their instructions on them; ncu, one H200): the rows of the
// long areas, the long areas a block has (long_below = R - (most - 1) S =
// long_q G + long_r: block B < G has long_q + (B < long_r) of them), and a
// row group's token rows (tokens = rows_q (G / P) + rows_r: group g has
// rows_q + (g < rows_r)).
struct FusedLaunchConsts {
  int most = 0;
  int long_q = 0;
  int long_r = 0;
  int rows_q = 0;
  int rows_r = 0;
};
inline FusedLaunchConsts FusedLaunchConstsOf(const FusedSlots& s, int64_t tokens) {
  FusedLaunchConsts c;
  if (s.grid <= 0 || s.stride <= 0 || s.parts <= 0) return c;
  c.most = (s.rows + s.stride - 1) / s.stride;
  const int long_below = s.rows - (c.most - 1) * s.stride;
  c.long_q = long_below / s.grid;
  c.long_r = long_below % s.grid;
  const int groups = s.grid / s.parts;
  c.rows_q = static_cast<int>(tokens / groups);
  c.rows_r = static_cast<int>(tokens % groups);
  return c;
}

// Token rows of row group g (g < G / P) from the launch's constants.
QR_HOST_DEVICE inline int FusedGroupTokens(const FusedLaunchConsts& c, int group) {
  return c.rows_q + (group < c.rows_r ? 1 : 0);
}

// Block B's local rows, with every division that does not depend on q done
// once: the fused kernel maps each atom it sends and receives through Row,
// and a region holds at most 2^20 rows, so 32-bit arithmetic suffices (a
// 64-bit division per atom cost the first kernel a visible share of its
// time).
struct FusedBlockMap {
  int block = 0;
  int grid = 0;
  int stride = 0;
  int most = 0;        // ceil(R / S): rows of the block's long areas
  int long_areas = 0;  // they come first
  int long_rows = 0;   // local rows in them
  QR_HOST_DEVICE FusedBlockMap(const FusedSlots& s, int b)
      : block(b),
        grid(s.grid),
        stride(s.stride),
        most((s.rows + s.stride - 1) / s.stride),
        long_areas(FusedBlockLongAreas(s, b)),
        long_rows(long_areas * most) {}
  // The same from the launch's constants, without a division (the kernel's).
  QR_HOST_DEVICE FusedBlockMap(const FusedSlots& s, const FusedLaunchConsts& c, int b)
      : block(b),
        grid(s.grid),
        stride(s.stride),
        most(c.most),
        long_areas(c.long_q + (b < c.long_r ? 1 : 0)),
        long_rows(long_areas * most) {}
  QR_HOST_DEVICE FusedSlotRow Row(int q) const {
    // The block's first area (most calls: a block's rows fit in it).
    if (q < (long_areas > 0 ? most : most - 1)) return FusedSlotRow{0, block + q * stride};
    int m = 0;
    int k = 0;
    if (q < long_rows) {
      m = q / most;
      k = q - m * most;
    } else {
      const int rest = q - long_rows;
      const int shorter = most - 1;
      m = long_areas + rest / shorter;
      k = rest - (rest / shorter) * shorter;
    }
    return FusedSlotRow{m, block + m * grid + k * stride};
  }
};

// Token rows of block B: those of its row group B / P, whose rows are
// B / P, B / P + G / P, ... below tokens.
QR_HOST_DEVICE inline int64_t FusedBlockTokens(int64_t tokens, const FusedSlots& s, int block) {
  const int groups = s.grid / s.parts;
  return (tokens - block / s.parts + groups - 1) / groups;
}

// Local slot rows block B needs for its token rows: each row gives each of
// its P blocks hidden / 8 / P atoms.
QR_HOST_DEVICE inline int64_t FusedBlockNeed(int64_t tokens, int64_t hidden, const FusedSlots& s,
                                             int block) {
  const int64_t atoms = FusedBlockTokens(tokens, s, block) * (hidden / 8 / s.parts);
  return (atoms + kFusedSlotRowAtoms - 1) / kFusedSlotRowAtoms;
}

// Threads of a fused block for rows of `hidden` values split over `parts`
// blocks, or 0 when the kernel cannot take them. Part p of a row owns the
// sum-of-squares lanes [p * 256 / P, (p + 1) * 256 / P) (kernels/rmsnorm_lanes.h)
// and every chunk of them; its thread u takes chunk l + 256 m of lane
// l = p * 256 / P + u % (256 / P), m = u / (256 / P), and keeps it in
// registers from the receive to the norm. One part: a thread per chunk,
// rounded up to whole lane sets (256 threads at least). Several parts
// (a power of two up to 8): rows of whole lane sets (hidden a multiple of
// 2048). At most kFusedMaxThreads either way.
inline constexpr int kFusedMaxThreads = 1024;
inline constexpr int kFusedMaxParts = 8;
QR_HOST_DEVICE inline int FusedThreads(int64_t hidden, int parts) {
  const int64_t chunks = hidden / 8;
  int64_t threads = 0;
  if (parts == 1) {
    threads = (chunks + kRmsNormLanes - 1) / kRmsNormLanes * kRmsNormLanes;
  } else if (parts == 2 || parts == 4 || parts == kFusedMaxParts) {
    threads = chunks % kRmsNormLanes == 0 ? chunks / parts : 0;
  }
  return threads > 0 && threads <= kFusedMaxThreads ? static_cast<int>(threads) : 0;
}

// The lane-threads form: one block takes a whole row, each thread two
// chunks of one lane, kept in registers from the receive to the norm:
// thread u (lane l = u % 256, m = u / 256) takes chunks l + 256 (2m) and
// l + 256 (2m + 1), so the owner (m = 0) adds its two chunks' squares, then
// its helper's (m = 1), in the reference's order. Threads: 256 for rows of
// 2056-4096 values, 512 up to 8192 (half the one-thread-a-chunk form's, so
// twice its blocks fit the grid cap); 0 for rows of one lane set or less
// (the other form's shape already) or longer (a block of 1024 would need
// more than the 48 KiB of shared memory a launch gets without opting in,
// and on one H200 it measured no faster than two parts at 40-64 x 16384).
inline constexpr int kFusedLaneChunks = 2;
inline constexpr int kFusedLaneMaxThreads = 512;
QR_HOST_DEVICE inline int FusedLaneThreads(int64_t hidden) {
  const int64_t chunks = hidden / 8;
  const int64_t per_block = int64_t{kRmsNormLanes} * kFusedLaneChunks;
  const int64_t threads = (chunks + per_block - 1) / per_block * kRmsNormLanes;
  return chunks > kRmsNormLanes && threads <= kFusedLaneMaxThreads ? static_cast<int>(threads) : 0;
}

// Parts of a row when each row group has one token row: one block while
// it has at most kFusedSplitAbove threads, else blocks of at most 256
// threads, so a row of 8192 values or more runs on several multiprocessors.
// Measured on one H200 (docs/performance.md "Fused all-reduce + RMSNorm"):
// with one token row, one multiprocessor issuing every instruction of a row
// of 8192 values was most of the kernel's time, and four parts of 256
// threads took 4.7 us against 5.4; a row of 4096 values split in two took
// 4.4 against 4.05 on one block of 512 threads, and still 3.80 against 3.76
// once the lane words were polled at once ("where the SM-side cost goes"):
// the exchange through L2 costs what two multiprocessors save. 0 when no
// split takes the row.
inline constexpr int kFusedSplitAbove = 512;
QR_HOST_DEVICE inline int FusedRowParts(int64_t hidden) {
  const int whole = FusedThreads(hidden, 1);
  if (whole > 0 && whole <= kFusedSplitAbove) return 1;
  for (int parts = 2; parts <= kFusedMaxParts; parts *= 2) {
    const int threads = FusedThreads(hidden, parts);
    if (threads > 0 && threads <= kRmsNormLanes) return parts;
  }
  return 0;
}

// Where a row's parts run as a cluster and exchange their lane sums through
// each other's shared memory (GpuBlockClusters()), the rows FusedRowParts
// keeps in one block of more than 256 threads (4096 values) split into the
// most parts of at least kFusedClusterPartThreads threads (and at most 256)
// whose tokens x parts blocks take at most half of max_blocks; 0 for other
// rows, or when no split is that small. Measured on one H200 (ranks sharing
// it, docs/performance.md "A row's parts as a cluster"), 1 x 4096 fp16 at
// world size 2: 3.42 us in four parts of 128 threads, 3.61 in two of 256,
// 3.87 in one block of 512; four parts won at 1-16 rows (64 blocks of the
// rank's 132) at world size 2 and 1-8 (32 of 66) at 4, two parts 0.1 us at
// 32 rows at 2, and both lost 0.1-0.5 us beyond half the blocks (four parts
// at 16 x 4096, world size 4; two at 64 x 4096, world size 2). Rows of 8192
// in eight parts of 128 (a cluster of 8) were no faster than four of 256 at
// one row and slower from two: those keep FusedRowParts' split.
inline constexpr int kFusedClusterPartThreads = 128;
QR_HOST_DEVICE inline int FusedClusterParts(int64_t tokens, int64_t hidden, int max_blocks) {
  const int whole = FusedThreads(hidden, 1);
  if (whole <= kRmsNormLanes || whole > kFusedSplitAbove) return 0;
  for (int parts = kFusedMaxParts; parts >= 2; parts /= 2) {
    const int threads = FusedThreads(hidden, parts);
    if (threads >= kFusedClusterPartThreads && threads <= kRmsNormLanes &&
        tokens * parts <= max_blocks / 2) {
      return parts;
    }
  }
  return 0;
}

// The fewest parts that take the row (rows walked by few blocks lose the
// least to the lane exchange between parts), 0 when none does.
QR_HOST_DEVICE inline int FusedFewestParts(int64_t hidden) {
  for (int parts = 1; parts <= kFusedMaxParts; parts *= 2) {
    if (FusedThreads(hidden, parts) > 0) return parts;
  }
  return 0;
}

// The lane inboxes of a rank's buffer (TwoShotLayout::fused_lanes): one of
// 256 fp32 lane sums for each part of each token row of a call, so a call
// of several parts a row may have at most this many token rows x parts
// (FusedOneShotSlots refuses more). FusedFewestParts never needs more
// parts than the row has lane sets (P <= hidden / 2048), so its calls have
// at most the message's bytes / 4096 <= OneShotMaxBytes(2) / 4096 rows x
// parts; FusedRowParts may (4 parts of 6144 values) and is kept within the
// grid, hence this bound.
inline constexpr int64_t kFusedLaneInboxes = OneShotMaxBytes(2) / 4096;
inline constexpr int64_t kFusedLaneInboxBytes = int64_t{kRmsNormLanes} * 4;

// Blocks of `threads` threads a rank may launch so that every rank's blocks
// are resident at once. max_blocks counts blocks of the one-shot kernel's
// 256 threads: at most four per multiprocessor (kTwoShotBlocksPerSm, one
// GPU per rank) or the rank's share of two per multiprocessor (ranks
// sharing a GPU, max_blocks_shared.h). The fused kernel keeps 64 registers
// a thread at most (its __launch_bounds__), so a multiprocessor holds
// 1024 / threads of its blocks: the same threads as max_blocks' blocks.
QR_HOST_DEVICE inline int FusedMaxGrid(int max_blocks, int threads) {
  const int grid = max_blocks / ((threads + kRmsNormLanes - 1) / kRmsNormLanes);
  return grid > 1 ? grid : 1;
}

// The fused kernel's slots for a call of tokens x hidden split into `parts`
// blocks a row at world size ws whose layout has max_blocks blocks, with at
// most max_grid blocks, or grid 0 when the call does not fit (some block's
// token rows need more slot rows than its areas hold, or the areas exceed
// max_areas, the count a block can keep in shared memory). The same on
// every rank. hidden: a positive multiple of 8, whole lane sets for parts >
// 1 (FusedThreads(hidden, parts) takes it); tokens > 0.
FusedSlots FusedOneShotSlots(int64_t tokens, int64_t hidden, int max_blocks, int ws, int max_areas,
                             int max_grid, int parts = 1);

// How the one-launch kernel runs a call of tokens x hidden: the parts of a
// row (FusedClusterParts where `clusters` and it splits the row; else
// FusedRowParts when every row group then has one token row, so tokens x
// parts blocks fit FusedMaxGrid; else FusedFewestParts), the threads of a
// block, and the slots. slots.grid == 0: the kernel does not take the call.
// The same on every rank.
//
// form: which thread layout. kChunkThreads: a thread a chunk, rows split
// over parts or walked by blocks of up to 1024 threads (above). kLaneThreads:
// one block a row, two chunks a thread (FusedLaneThreads, above).
// kPolicy: the measured choice: one thread a chunk while every row group then
// has one token row (rows of more than 4096 values split into parts,
// FusedRowParts); the lane-threads form where it takes the row otherwise.
// Measured on one H200 (graph; docs/performance.md "Two chunks a thread" and
// "Peers' loads in groups"): at 4096 values one block of 512 threads a row was
// 0.25-0.5 us faster than the lane form's 256 threads up to 64 rows, and 1.5-3
// us slower at 128-256 (its blocks walk two rows there, the grid being capped);
// the 1024-thread blocks that walk rows of 8192 were 3-7 us slower at 64-128
// rows. Split rows of 8192 won from two token rows once a part's warp 0 polled
// the other parts' lane words at once (ReceiveLanes): ws 2, fp16, both ranks
// sharing the GPU, 4.44 / 4.94 / 5.06 us at 2 / 8 / 16 rows against the lane
// form's 5.0 / 5.1 / 5.2 (5.50 against 5.41 at 32), rank 0 alone 0.3-0.7 us
// faster at 1-32 rows; ws 4 and 8 by more (the lane form's two chunks each wait
// for ws - 1 peers, one chunk after the other).
enum class FusedRowForm { kPolicy, kChunkThreads, kLaneThreads };
// "policy", "chunk", "lane" (qr-kernel-cost --fused --form takes them).
inline const char* FusedRowFormName(FusedRowForm form) {
  return form == FusedRowForm::kChunkThreads  ? "chunk"
         : form == FusedRowForm::kLaneThreads ? "lane"
                                              : "policy";
}
struct FusedLaunchShape {
  int parts = 0;
  int threads = 0;
  int chunks_per_thread = 1;  // 1, or kFusedLaneChunks in the lane-threads form
  FusedSlots slots;
};
// clusters: whether a row's parts run as a cluster (GpuBlockClusters(),
// FusedClusterParts); the same on every rank.
FusedLaunchShape FusedShapeOf(int64_t tokens, int64_t hidden, int max_blocks, int ws, int max_areas,
                              FusedRowForm form = FusedRowForm::kPolicy, bool clusters = false);

// Whether the one-launch kernel can run the call: its rows fit the slots.
QR_HOST_DEVICE inline bool FusedOneLaunchFits(const FusedSlots& s) { return s.grid > 0; }

// Whether the fused request runs as one launch by default: it fits, and a
// block walks at most two token rows, or one when its rows take 1024
// threads (a block's rows run one after another). Measured on one H200 (ws
// 2, docs/performance.md "Fused all-reduce + RMSNorm"): two rows a block of
// 512 threads beat the two launches (6.9 against 7.6 us at 128 x 4096),
// four did not (11.9 against 10.6 at 256 x 4096), nor two rows of 1024
// threads (9.1 against 8.8 at 64 x 8192).
inline constexpr int64_t kFusedOneLaunchMaxRows = 2;
QR_HOST_DEVICE inline int64_t FusedOneLaunchRows(int threads) {
  return threads <= kFusedSplitAbove ? kFusedOneLaunchMaxRows : 1;
}
QR_HOST_DEVICE inline bool FusedOneLaunchPays(const FusedLaunchShape& shape, int64_t tokens) {
  return FusedOneLaunchFits(shape.slots) &&
         tokens <= FusedOneLaunchRows(shape.threads) * (shape.slots.grid / shape.slots.parts);
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_ONE_SHOT_FUSED_SLOTS_H_
