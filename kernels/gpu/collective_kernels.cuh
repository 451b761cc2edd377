// Reduce-scatter and all-gather on GPUs: the two-shot's phases
// (two_shot_phases.cuh) over the contiguous per-rank chunks of
// kernels/collective_layout.h, and for calls the policy sends one-shot the
// one-shot forms (one_shot_collectives.cu, which this file's slot-row rules
// do not concern: they use the one-shot region). Reduce-scatter is phase 1 (reduce_scatter.cu),
// all-gather phase 2 (all_gather.cu); both are flag-family kernels for every
// codec, with the all-reduce's slots, flags, colours, abort word and error
// word. Included by those two files and by rank_state.cu (the launch).
//
// KernelParams of such a call: p.bytes is the per-rank chunk's size (count *
// 2, a multiple of 16), p.num_tiles = CollectiveTiles(count, ws); in and out
// as the collective names them (comm/backend.h AllReduceCall).
//
// Slot-row reuse. Tiles of a block alternate between two rows of slots and
// flags per phase (colour parity), and colours run on across calls of every
// kind, so a row is written again two colours later. The all-reduce's
// argument (two_shot.cu) holds for any sequence of all-reduces,
// reduce-scatters and all-gathers because every kernel keeps two rules:
//   (a) a rank writes a row of colour x into a peer's buffer only after it
//       has seen that peer's flag of colour x - 1 (within a call: the wait of
//       the previous tile; for a call's first tile: the previous call's last
//       wait of this block, which every kind ends with);
//   (b) a rank raises a flag of colour y only after it has read every row of
//       colour y - 1 or less that a peer may write at colour y + 1 or less:
//       the all-reduce raises flag1(y) after decode(y - 2) and reduce(y - 1)
//       and writes phase 2 of colour y only after wait1(y) (two_shot.cu);
//       a reduce-scatter raises flag1(y) after its reduce of y - 1 (the
//       block barrier of SignalAll orders every thread's reads of that row
//       before the release); an all-gather raises flag2(y) after its
//       decode of y - 1; the first tile of a call raises its flag after the
//       previous kernel on the stream ended, so after all of its reads.
// The all-reduce gets (b) for free from its phase 2: the wait for a tile's
// phase 2 shows that every peer finished that tile's phase 1. A
// reduce-scatter has no phase 2, so its guard is the order of its own next
// flag: the next tile's data may go out before this tile's reduce (into the
// other row, which (a) already freed), but its flag only after it. So a
// reduce-scatter's last tile c leaves peers possibly still reading row
// parity(c); the next call writes parity(c + 1) first and parity(c) only at
// colour c + 2, after seeing every peer's flag of c + 1, which that peer
// raised in its next kernel.
//
// In a build with data-flag INT4/INT8 all-reduces these kernels still run
// INT4/INT8 with flags and record a flag-family codec state word, so the
// codec-change handshake (two_shot.h) runs between them and a data-flag
// all-reduce in either order.
#ifndef QR_KERNELS_GPU_COLLECTIVE_KERNELS_CUH_
#define QR_KERNELS_GPU_COLLECTIVE_KERNELS_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/collective_layout.h"
#include "kernels/geometry.h"
#include "kernels/gpu/codecs.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/gpu/two_shot_phases.cuh"
#include "kernels/types.h"

namespace qr::kernels::gpu {

// Tile view of the collectives (kernels/collective_layout.h): chunk q is the
// buffer's bytes [q * p.bytes, (q + 1) * p.bytes), and shard s of tile t is
// chunk s's bytes [t * kShardBytes, (t + 1) * kShardBytes); an atom at or
// past the chunk's end is padding. A buffer of one chunk (the
// reduce-scatter's output, the all-gather's input) is shard 0.
template <int kWs>
struct ChunkTiles {
  static constexpr int kA = kTwoShotAtoms / kWs;
  static constexpr size_t kShardBytes = static_cast<size_t>(kTileBytes / kWs);
  static_assert(kA * kAtomStride == kShardBytes, "a shard is kA atom rows");
  static_assert(kAtomStride == 2 * static_cast<size_t>(kAtomRowElems), "an atom row's bytes");
  QR_DEVICE_INLINE static bool Offset(const KernelParams& p, int tile, int s, int k, size_t& off) {
    const size_t in_chunk = static_cast<size_t>(
        CollectiveAtomOffsetInChunk(tile, k, static_cast<int>(threadIdx.x), kWs));
    off = static_cast<size_t>(s) * p.bytes + in_chunk;
    return in_chunk < p.bytes;
  }
};

// The reduce-scatter / all-gather kernel for (elem, ws, codec); nullptr if
// unsupported (INT3 at world size 4 or 8, values outside the enums).
KernelFn ReduceScatterKernelFor(WorkFormat elem, int ws, Codec codec);
KernelFn AllGatherKernelFor(WorkFormat elem, int ws, Codec codec);

// The one-shot forms (one_shot_collectives.cu) for a call that
// CollectiveRunsOneShot (collective_request.h): the reduce-scatter of
// (elem, ws), exact values (kBf16Cast runs the bf16 kernel, the cast off),
// and the all-gather of ws (bits copied, any format). nullptr if
// unsupported.
KernelFn OneShotReduceScatterKernelFor(WorkFormat elem, int ws);
KernelFn OneShotAllGatherKernelFor(int ws);

// The kernel K<elem, codec, its codec template, ws>::Get() of a flag-family
// kernel template, as the two-shot's own choice does it.
template <template <WorkFormat, Codec, template <bool, int> class, int> class K, WorkFormat kElem,
          int kWs>
KernelFn PickFlagFamilyCodec(Codec codec) {
  switch (codec) {
    case Codec::kFp:
      return K<kElem, Codec::kFp, FpCodec, kWs>::Get();
    case Codec::kInt8:
      return K<kElem, Codec::kInt8, Int8Codec, kWs>::Get();
    case Codec::kInt6:
      return K<kElem, Codec::kInt6, Int6Codec, kWs>::Get();
    case Codec::kInt4:
      return K<kElem, Codec::kInt4, Int4Codec, kWs>::Get();
    case Codec::kInt3:
      if constexpr (CodecRunsAtWorldSize(Codec::kInt3, kWs)) {
        return K<kElem, Codec::kInt3, Int3Codec, kWs>::Get();
      } else {
        return nullptr;
      }
  }
  return nullptr;
}

template <template <WorkFormat, Codec, template <bool, int> class, int> class K, WorkFormat kElem>
KernelFn PickFlagFamilyWs(int ws, Codec codec) {
  switch (ws) {
    case 2:
      return PickFlagFamilyCodec<K, kElem, 2>(codec);
    case 4:
      return PickFlagFamilyCodec<K, kElem, 4>(codec);
    case 8:
      return PickFlagFamilyCodec<K, kElem, 8>(codec);
  }
  return nullptr;
}

template <template <WorkFormat, Codec, template <bool, int> class, int> class K>
KernelFn PickFlagFamilyKernel(WorkFormat elem, int ws, Codec codec) {
  switch (elem) {
    case WorkFormat::kFp16:
      return PickFlagFamilyWs<K, WorkFormat::kFp16>(ws, codec);
    case WorkFormat::kBf16:
      return PickFlagFamilyWs<K, WorkFormat::kBf16>(ws, codec);
    case WorkFormat::kBf16Cast:
      return PickFlagFamilyWs<K, WorkFormat::kBf16Cast>(ws, codec);
  }
  return nullptr;
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_COLLECTIVE_KERNELS_CUH_
