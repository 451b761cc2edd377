// The all-gather kernel: the two-shot's phase 2 over the contiguous chunks of
// kernels/collective_layout.h, with this rank's input in place of the reduced
// shard (collective_kernels.cuh says how the slot rows stay safe);
// kernels/all_gather_reference.h is the specification. Per tile: this rank's
// shard (its input's values of the tile) is encoded once and stored into
// every peer's phase-2 slot, flags raised; its own output chunk is decoded
// from the same words in registers; once every source's flag is up, every
// peer's shard is decoded into that peer's chunk. Every rank decodes the
// same bytes, so outputs are bit-identical on all ranks.
#include <hip/hip_runtime.h>

#include "kernels/gpu/codecs.cuh"
#include "kernels/gpu/collective_kernels.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_call.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/gpu/two_shot_phases.cuh"

namespace qr::kernels {
namespace gpu {
namespace {

// One block, persistent over tiles blockIdx.x, blockIdx.x + gridDim.x, ...
template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
__global__ void __launch_bounds__(
    kTwoShotThreads, (CodecT<Elem<kElem>::kMathBf16, kTwoShotAtoms / kWs>::kMinBlocksPerSm))
    AllGatherKernel(KernelParams p) {
  constexpr int kA = kTwoShotAtoms / kWs;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  using C = CodecT<kBf16, kA>;
  using Wire = typename C::Wire;
  using T = ChunkTiles<kWs>;
  static_assert(C::kShardWireBytes * kWs <= static_cast<size_t>(kTileSlotBytes), "slot too small");

  uint32_t base;
  if (!BeginTwoShotCall<kCodec, kWs, /*kDataFlag=*/false>(p, base)) return;

  // This thread's atoms of my shard of `tile` (shard 0 of the one-chunk
  // input); atoms past the end read as zero.
  auto load_own = [&](int tile, Vec16(&atoms)[kA]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) atoms[k] = LoadInputAtom<T>(p, tile, 0, k);
  };

  // Per tile c: my shard's words out to every peer's row c, flag2(c); my
  // own chunk's output from the same words; wait2(c); the integer codecs
  // store tile c + 1's words now (into the other row, which the wait for c
  // freed: rule (a) of collective_kernels.cuh), so their transfer overlaps
  // the decode; decode every peer's shard of c; FP (link bound; it
  // prefetches its input instead) stores tile c + 1's words here; then
  // flag2(c + 1), after every thread's reads of row c (rule (b)).
  uint32_t colour = base + 1;
  int tile = blockIdx.x;  // < num_tiles: the grid never exceeds the tiles
  Vec16 in[kA];
  load_own(tile, in);
  Wire own = C::template EncodeInput<kElem>(in, threadIdx.x);
  SendPhase2<C, kWs>(p, colour, own);
  SignalAll<kWs>(p.flags2, SlotRow(colour), colour, p);
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    const int next = tile + static_cast<int>(gridDim.x);
    const bool more = next < p.num_tiles;
    if (C::kPrefetchInput && more) load_own(next, in);
    StoreOutputShard<kElem, C, T>(p, tile, p.rank, own);
    if (!WaitAll<kWs>(MyFlagRow(p, p.flags2, c), c, p)) return;
    if (C::kOverlapNextTile && more) {
      if (!C::kPrefetchInput) load_own(next, in);
      own = C::template EncodeInput<kElem>(in, threadIdx.x);
      SendPhase2<C, kWs>(p, c + 1, own);
    }
    ReceivePhase2<kElem, C, kWs, T>(p, tile, c);
    if (more) {
      if (!C::kOverlapNextTile) {
        if (!C::kPrefetchInput) load_own(next, in);
        own = C::template EncodeInput<kElem>(in, threadIdx.x);
        SendPhase2<C, kWs>(p, c + 1, own);
      }
      ++colour;
      SignalAll<kWs>(p.flags2, SlotRow(colour), colour, p);
    }
  }
  if (threadIdx.x == 0) p.colours[blockIdx.x] = colour;
}

template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
struct AllGatherKernelOf {
  static KernelFn Get() { return AllGatherKernel<kElem, kCodec, CodecT, kWs>; }
};

}  // namespace

KernelFn AllGatherKernelFor(WorkFormat elem, int ws, Codec codec) {
  return PickFlagFamilyKernel<AllGatherKernelOf>(elem, ws, codec);
}

}  // namespace gpu
}  // namespace qr::kernels
