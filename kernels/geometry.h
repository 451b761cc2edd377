// The algorithms' fixed geometry, the same for the host reference, the host
// backend and the GPU kernels (constexpr only: nvcc and hip-clang read it
// too). docs/codecs.md "Two-shot" and "One-shot" describe it.
//
//   tile   16384 values (32 KiB of 16-bit data), what one two-shot step
//          moves. A call of n values has NumTiles(n) tiles; the last one may
//          be partial.
//   shard  a rank's share of a tile: a tile splits into world_size
//          contiguous shards of ShardElems(ws) = 16384/ws values, and rank r
//          owns shard r of every tile. A shard is 8/ws atom rows
//          (kernels/codec_layout.h), so its wire size is ShardWireBytes.
//   slot   where one tile's wire data lands in a receive buffer: the FP
//          tile's size, which every codec's tile fits.
//   one-shot region
//          per phase, world_size sources of up to OneShotMaxBytes(ws) each:
//          kOneShotRegionBytes whatever the world size.
#ifndef QR_KERNELS_GEOMETRY_H_
#define QR_KERNELS_GEOMETRY_H_

#include <cstdint>

#include "common/limits.h"
#include "kernels/codec_layout.h"
#include "kernels/types.h"

namespace qr::kernels {

inline constexpr int64_t kTileElems = 16384;
static_assert(kTileElems == int64_t{kTileAtomRowsPerTile} * kAtomRowElems, "a tile is 8 atom rows");
inline constexpr int64_t kTileBytes = kTileElems * 2;  // 32768
inline constexpr int64_t kTileSlotBytes = kTileBytes;  // wire bytes of a tile, any codec
static_assert(kTileElems % (int64_t{kMaxWorldSize} * kAtomRowElems) == 0,
              "every world size's shard is whole atom rows");

constexpr int64_t NumTiles(int64_t num_elems) { return (num_elems + kTileElems - 1) / kTileElems; }
constexpr int64_t ShardElems(int world_size) { return kTileElems / world_size; }
constexpr int64_t ShardWireBytes(Codec codec, int world_size) {
  return WireBytes(codec, ShardElems(world_size));
}

inline constexpr int64_t kOneShotRegionBytes = int64_t{8} << 20;  // per phase
// The largest one-shot call at `world_size`, as bytes and as values per rank
// (ws 2: 4 MiB, 4: 2 MiB, 8: 1 MiB). Every layer that asks whether a
// call fits one-shot asks these (the policy's ceiling is at most this).
constexpr int64_t OneShotMaxBytes(int world_size) { return kOneShotRegionBytes / world_size; }
constexpr int64_t OneShotMaxElems(int world_size) { return OneShotMaxBytes(world_size) / 2; }

}  // namespace qr::kernels

#endif  // QR_KERNELS_GEOMETRY_H_
