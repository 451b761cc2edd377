// The two-shot all-reduce kernels: the flag family's kernel (FP, INT6, INT3,
// and INT4/INT8 unless built with data flags; two_shot.h) over the phases of
// two_shot_phases.cuh, and the choice of a kernel per (format, world size,
// codec). The data-flag family's kernel is two_shot_data_flag.cuh; the
// layout and grid are two_shot_layout.cu.
#include <hip/hip_runtime.h>

#include "kernels/gpu/codecs.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_call.cuh"
#include "kernels/gpu/two_shot_data_flag.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/gpu/two_shot_phases.cuh"

namespace qr::kernels {
namespace gpu {
namespace {

// One block, persistent over tiles blockIdx.x, blockIdx.x + gridDim.x, ...
// The flag family (FP, INT6, INT3; two_shot.h).
template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
__global__ void __launch_bounds__(
    kTwoShotThreads, (CodecT<Elem<kElem>::kMathBf16, kTwoShotAtoms / kWs>::kMinBlocksPerSm))
    TwoShotKernel(KernelParams p) {
  constexpr int kA = kTwoShotAtoms / kWs;  // atoms per rank shard
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  using C = CodecT<kBf16, kA>;
  using Wire = typename C::Wire;
  using T = MessageTiles<kWs>;
  static_assert(C::kShardWireBytes * kWs <= static_cast<size_t>(kTileSlotBytes), "slot too small");
  static_assert(!UsesDataFlags(kCodec));

  uint32_t base;
  if (!BeginTwoShotCall<kCodec, kWs>(p, base)) return;

  const int tid = threadIdx.x;
  // Tiles alternate between two rows of slots and flags (colour parity), so
  // that the next tile's phase 1 can go out before this tile's phase 2 has
  // arrived and its transfer overlaps the wait (C::kOverlapNextTile; else
  // send1(i+1) comes after decode(i), which only adds ordering). Per tile i a
  // rank does: wait1(i), reduce(i), send2(i), send1(i+1), flag2(i) and
  // flag1(i+1) under one fence, wait2(i), decode(i). Row
  // parity(i) is written again only for tile i + 2, when every peer is done
  // with it: we send1(i+2) after wait1(i+1), and a peer raises flag1(i+1)
  // after reduce(i) and wait1(i); we send2(i+2) after wait1(i+2), and a peer
  // raises flag1(i+2) after decode(i) and wait2(i). Colours continue across
  // calls, so the rows keep alternating through kernel boundaries.
  //
  // A rank's own shard never goes through memory: the Wire of its phase-1
  // shard stays in registers until the reduce, and its phase-2 shard is
  // decoded from registers (the same words the peers receive, so every rank
  // still decodes the same bits). Its slots in its own buffer go unused.
  //
  // Input: FP prefetches the whole next tile as stored (converting would
  // wait for the loads) and converts a shard when it encodes it; the integer
  // codecs load and convert one shard at a time right before encoding it, so
  // only that shard's atoms take registers (the whole tile's 32 registers
  // next to the encode made the kernels spill; 4 blocks per multiprocessor
  // keep enough loads in flight).
  uint32_t colour = base + 1;
  int tile = blockIdx.x;  // < num_tiles: the grid never exceeds the tiles
  Vec16 input[kTwoShotAtoms];
  Wire own1;
  if (C::kPrefetchInput) LoadInputTile<kWs, T>(p, tile, input);
  SendPhase1<kElem, C, kWs, T>(p, tile, input, colour, own1);
  SignalAll<kWs>(p.flags1, SlotRow(colour), colour, p);
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    const bool more = tile + static_cast<int>(gridDim.x) < p.num_tiles;
    if (C::kPrefetchInput && more) LoadInputTile<kWs, T>(p, tile + gridDim.x, input);
    if (!WaitAll<kWs>(MyFlagRow(p, p.flags1, c), c, p)) return;

    // Reduce my shard in rank order 0..ws-1 (mine from registers).
    Vec16 reduced[kA];
    ReducePhase1<C, kWs>(p, c, own1, reduced);

    // Phase 2: the reduced shard, encoded once, goes to every other rank,
    // row slot (block, my rank); my output of it comes from the same words.
    {
      const Wire w2 = C::Encode(reduced, tid);
      SendPhase2<C, kWs>(p, c, w2);
      StoreOutputShard<kElem, C, T>(p, tile, p.rank, w2);
    }

    // The next tile's phase 1 goes out while this tile's phase 2 arrives,
    // and one fence publishes both.
    if (C::kOverlapNextTile && more) {
      SendPhase1<kElem, C, kWs, T>(p, tile + gridDim.x, input, ++colour, own1);
      SignalAllTwice<kWs>(p.flags2, SlotRow(c), c, p.flags1, SlotRow(colour), colour, p);
    } else {
      SignalAll<kWs>(p.flags2, SlotRow(c), c, p);
    }

    if (!WaitAll<kWs>(MyFlagRow(p, p.flags2, c), c, p)) return;
    ReceivePhase2<kElem, C, kWs, T>(p, tile, c);
    if (!C::kOverlapNextTile && more) {
      SendPhase1<kElem, C, kWs, T>(p, tile + gridDim.x, input, ++colour, own1);
      SignalAll<kWs>(p.flags1, SlotRow(colour), colour, p);
    }
  }
  if (tid == 0) p.colours[blockIdx.x] = colour;
}

template <WorkFormat kElem, int kWs>
KernelFn PickCodec(Codec codec) {
  switch (codec) {
    case Codec::kFp:
      return TwoShotKernel<kElem, Codec::kFp, FpCodec, kWs>;
    case Codec::kInt8:
      if constexpr (UsesDataFlags(Codec::kInt8)) {
        return TwoShotDataFlagKernel<kElem, Codec::kInt8, Int8Codec, kWs>;
      } else {
        return TwoShotKernel<kElem, Codec::kInt8, Int8Codec, kWs>;
      }
    case Codec::kInt6:
      return TwoShotKernel<kElem, Codec::kInt6, Int6Codec, kWs>;
    case Codec::kInt4:
      if constexpr (UsesDataFlags(Codec::kInt4)) {
        return TwoShotDataFlagKernel<kElem, Codec::kInt4, Int4Codec, kWs>;
      } else {
        return TwoShotKernel<kElem, Codec::kInt4, Int4Codec, kWs>;
      }
    case Codec::kInt3:
      if constexpr (CodecRunsAtWorldSize(Codec::kInt3, kWs)) {
        return TwoShotKernel<kElem, Codec::kInt3, Int3Codec, kWs>;
      } else {
        return nullptr;
      }
  }
  return nullptr;
}

template <WorkFormat kElem>
KernelFn PickWs(int ws, Codec codec) {
  switch (ws) {
    case 2:
      return PickCodec<kElem, 2>(codec);
    case 4:
      return PickCodec<kElem, 4>(codec);
    case 8:
      return PickCodec<kElem, 8>(codec);
  }
  return nullptr;
}

KernelFn PickKernel(WorkFormat elem, int ws, Codec codec) {
  switch (elem) {
    case WorkFormat::kFp16:
      return PickWs<WorkFormat::kFp16>(ws, codec);
    case WorkFormat::kBf16:
      return PickWs<WorkFormat::kBf16>(ws, codec);
    case WorkFormat::kBf16Cast:
      return PickWs<WorkFormat::kBf16Cast>(ws, codec);
  }
  return nullptr;
}

}  // namespace

KernelFn TwoShotKernelFor(WorkFormat elem, int ws, Codec codec) {
  return PickKernel(elem, ws, codec);
}

}  // namespace gpu
}  // namespace qr::kernels
