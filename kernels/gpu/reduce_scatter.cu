// The reduce-scatter kernel: the two-shot's phase 1 over the contiguous
// chunks of kernels/collective_layout.h (collective_kernels.cuh says how the
// slot rows stay safe without a phase 2); kernels/reduce_scatter_reference.h
// is the specification. Per tile: every shard s of this rank's input (its
// chunk s's values of the tile) is encoded and stored into rank s's phase-1
// slot, flags raised; once every source's flag is up, this rank's shard is
// reduced in rank order 0..ws-1 (ReduceShard's bits) and written to the
// output, cast back to bf16 when casting. No second quantization.
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
    ReduceScatterKernel(KernelParams p) {
  constexpr int kA = kTwoShotAtoms / kWs;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  using C = CodecT<kBf16, kA>;
  using Wire = typename C::Wire;
  using T = ChunkTiles<kWs>;
  static_assert(C::kShardWireBytes * kWs <= static_cast<size_t>(kTileSlotBytes), "slot too small");

  uint32_t base;
  if (!BeginTwoShotCall<kCodec, kWs, /*kDataFlag=*/false>(p, base)) return;

  // The reduced shard into the output (this rank's chunk, shard 0 of a
  // one-chunk view), cast back to bf16 when casting (Elem::Out).
  auto store_reduced = [&](int tile, const Vec16(&reduced)[kA]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      size_t off;
      if (T::Offset(p, tile, 0, k, off)) {
        platform::StoreOutput16(p.out + off, Elem<kElem>::Out(reduced[k]));
      }
    }
  };

  // Per tile c: wait1(c); the integer codecs store tile c + 1's phase-1
  // data now (into the other row, which the wait for c freed: rule (a) of
  // collective_kernels.cuh), so its transfer overlaps the reduce; reduce(c);
  // output(c); FP (link bound, prefetching its input instead) stores tile
  // c + 1's data here; then flag1(c + 1), after every thread's reads of row
  // c (rule (b): no peer writes row c again before it sees this flag).
  uint32_t colour = base + 1;
  int tile = blockIdx.x;  // < num_tiles: the grid never exceeds the tiles
  Vec16 input[kTwoShotAtoms];
  Wire own;
  if (C::kPrefetchInput) LoadInputTile<kWs, T>(p, tile, input);
  SendPhase1<kElem, C, kWs, T>(p, tile, input, colour, own);
  SignalAll<kWs>(p.flags1, SlotRow(colour), colour, p);
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    const int next = tile + static_cast<int>(gridDim.x);
    const bool more = next < p.num_tiles;
    if (C::kPrefetchInput && more) LoadInputTile<kWs, T>(p, next, input);
    if (!WaitAll<kWs>(MyFlagRow(p, p.flags1, c), c, p)) return;
    Wire own_next = own;
    if (C::kOverlapNextTile && more) SendPhase1<kElem, C, kWs, T>(p, next, input, c + 1, own_next);
    {
      Vec16 reduced[kA];
      ReducePhase1<C, kWs>(p, c, own, reduced);
      store_reduced(tile, reduced);
    }
    if (more) {
      if (!C::kOverlapNextTile) SendPhase1<kElem, C, kWs, T>(p, next, input, c + 1, own_next);
      own = own_next;
      ++colour;
      SignalAll<kWs>(p.flags1, SlotRow(colour), colour, p);
    }
  }
  if (threadIdx.x == 0) p.colours[blockIdx.x] = colour;
}

template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
struct ReduceScatterKernelOf {
  static KernelFn Get() { return ReduceScatterKernel<kElem, kCodec, CodecT, kWs>; }
};

}  // namespace

KernelFn ReduceScatterKernelFor(WorkFormat elem, int ws, Codec codec) {
  return PickFlagFamilyKernel<ReduceScatterKernelOf>(elem, ws, codec);
}

}  // namespace gpu
}  // namespace qr::kernels
