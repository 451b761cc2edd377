// How reduce-scatter and all-gather lay their contiguous per-rank shards onto
// the two-shot's tiles (kernels/geometry.h), so that both reuse the two-shot's
// phases: reduce-scatter is its phase 1, all-gather its phase 2
// (docs/collectives.md). constexpr only: nvcc and hip-clang read it too.
//
// A call has a per-rank count n (recvcount of a reduce-scatter, sendcount of
// an all-gather, a multiple of 8 values = 16 bytes). The whole message
// (world_size * n values) is world_size contiguous chunks, chunk q =
// [q * n, (q + 1) * n): rank q's input of an all-gather, rank q's output of a
// reduce-scatter. Collective tile t takes from every chunk q the values
// [t * ShardElems(ws), (t + 1) * ShardElems(ws)) of that chunk, as shard q of
// the tile; values past the chunk's end are +0 padding. That tile is exactly
// the two-shot's tile t of the permuted message M with
//   M[t * kTileElems + q * ShardElems(ws) + i] = chunk q's value t * ShardElems(ws) + i,
// so rank q owns shard q of every tile as in the all-reduce, and a shard's
// blocks of 32 values are 32 consecutive values of one chunk.
#ifndef QR_KERNELS_COLLECTIVE_LAYOUT_H_
#define QR_KERNELS_COLLECTIVE_LAYOUT_H_

#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/geometry.h"

namespace qr::kernels {

// Tiles of a collective whose chunks hold `count` values each.
constexpr int64_t CollectiveTiles(int64_t count, int world_size) {
  return (count + ShardElems(world_size) - 1) / ShardElems(world_size);
}

// Index, within its chunk, of the first value of tile `tile`'s shard.
constexpr int64_t CollectiveChunkOffset(int64_t tile, int world_size) {
  return tile * ShardElems(world_size);
}

// Index in the whole message (world_size chunks of `count`) of value `i` of
// shard `shard` of tile `tile`; valid while CollectiveChunkOffset + i < count.
constexpr int64_t CollectiveMessageIndex(int64_t count, int64_t tile, int shard, int64_t i,
                                         int world_size) {
  return shard * count + CollectiveChunkOffset(tile, world_size) + i;
}

// Byte offset, within its chunk, of the 16-byte atom that GPU thread
// `thread` handles as atom row `row` of a shard of tile `tile` (the GPU
// kernels' tile view, kernels/gpu/collective_kernels.cuh ChunkTiles: thread t
// holds atom t of each of the shard's atom rows, as in the two-shot). Its
// values are CollectiveMessageIndex(count, tile, shard, row * kAtomRowElems
// + thread * kAtomElems + j, ws) - shard * count for j < kAtomElems; the atom
// lies in the chunk while the offset is below count * 2.
constexpr int64_t CollectiveAtomOffsetInChunk(int64_t tile, int row, int thread, int world_size) {
  return (CollectiveChunkOffset(tile, world_size) + int64_t{row} * kAtomRowElems +
          int64_t{thread} * kAtomElems) *
         2;
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_COLLECTIVE_LAYOUT_H_
