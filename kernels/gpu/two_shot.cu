#include <hip/hip_runtime.h>

#include "kernels/gpu/codecs.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels {
namespace gpu {
namespace {

constexpr size_t kAtomStride = kTwoShotThreads * 16;  // bytes between a thread's atoms

// One block, persistent over tiles blockIdx.x, blockIdx.x + gridDim.x, ...
template <WorkFormat kElem, template <bool, int> class CodecT, int kWs>
__global__ void __launch_bounds__(
    kTwoShotThreads, (CodecT<Elem<kElem>::kMathBf16, kTwoShotAtoms / kWs>::kMinBlocksPerSm))
    TwoShotKernel(KernelParams p) {
  constexpr int kA = kTwoShotAtoms / kWs;  // atoms per rank shard
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  using C = CodecT<kBf16, kA>;
  using Wire = typename C::Wire;
  static_assert(C::kShardWireBytes * kWs <= static_cast<size_t>(kTileSlotBytes), "slot too small");

  // A rank that gave up drains every later call at once (sticky error). One
  // thread reads the flag (device memory) for the whole block.
  __shared__ uint32_t gave_up;
  if (threadIdx.x == 0) gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
  __syncthreads();
  if (gave_up != kGpuErrorNone) return;

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
  auto row = [&](uint32_t colour) { return blockIdx.x * 2 + (colour & 1u); };
  auto flags = [&](size_t offset, uint32_t colour) {
    return reinterpret_cast<const uint32_t*>(p.buffers[p.rank] + offset) +
           row(colour) * kMaxWorldSize;
  };
  auto slot = [&](uint32_t colour) { return static_cast<size_t>(row(colour)) * kTileSlotBytes; };

  // This thread's input atoms of `tile`; atoms past the end read as zero
  // (sizes are whole atoms). FP prefetches the whole next tile as stored
  // (converting would wait for the loads) and converts a shard when it
  // encodes it; the integer codecs load and convert one shard at a time
  // right before encoding it, so only that shard's atoms take registers
  // (the whole tile's 32 registers next to the encode made the kernels
  // spill; 4 blocks per multiprocessor keep enough loads in flight).
  auto load_atom = [&](int tile, int i) {
    const size_t off = static_cast<size_t>(tile) * kTileBytes + tid * 16 + i * kAtomStride;
    return off < p.bytes ? platform::LoadInput16(p.in + off) : Vec16{};
  };
  auto load_input = [&](int tile, Vec16(&atoms)[kTwoShotAtoms]) {
#pragma unroll
    for (int i = 0; i < kTwoShotAtoms; ++i) atoms[i] = load_atom(tile, i);
  };

  // Phase 1 of `tile`: shard r goes to rank r, row slot (block, my rank); my
  // own shard stays in `own`. `prefetched` holds the tile's input if
  // C::kPrefetchInput. The caller raises the flags.
  auto phase1 = [&](int tile, const Vec16(&prefetched)[kTwoShotAtoms], uint32_t colour, Wire& own) {
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      Vec16 shard[kA];
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        shard[k] = C::kPrefetchInput ? prefetched[r * kA + k] : load_atom(tile, r * kA + k);
      }
      const Wire w = C::template EncodeInput<kElem>(shard, tid);
      // Written unconditionally at r = 0 (exactly one r is my rank), so the
      // previous tile's `own` is dead here and takes no registers.
      if (r == 0 || r == p.rank) own = w;
      if (r != p.rank) {
        C::Store(w, p.buffers[r] + p.data1 + slot(colour) + p.rank * C::kShardWireBytes, tid);
      }
    }
  };

  // Shard s of `tile` into the output, atom by atom (atoms past the end
  // are not written).
  auto store_output = [&](int tile, int s, const Wire& w) {
    const size_t base = static_cast<size_t>(tile) * kTileBytes + tid * 16;
    C::template DecodeOut<kElem>(w, [&](int k, const Vec16& v) {
      const size_t off = base + (s * kA + k) * kAtomStride;
      if (off < p.bytes) platform::StoreOutput16(p.out + off, v);
    });
  };

  uint32_t colour = p.colours[blockIdx.x] + 1;
  int tile = blockIdx.x;  // < num_tiles: the grid never exceeds the tiles
  Vec16 input[kTwoShotAtoms];
  Wire own1;
  if (C::kPrefetchInput) load_input(tile, input);
  phase1(tile, input, colour, own1);
  SignalAll<kWs>(p.flags1, row(colour), colour, p);
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    const bool more = tile + static_cast<int>(gridDim.x) < p.num_tiles;
    if (C::kPrefetchInput && more) load_input(tile + gridDim.x, input);
    if (!WaitAll<kWs>(flags(p.flags1, c), c, p)) return;

    // Reduce my shard in rank order 0..ws-1 (mine from registers).
    const char* my_data1 = p.buffers[p.rank] + p.data1 + slot(c);
    Wire src[kWs];
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      const Wire loaded = s == p.rank ? own1 : C::Load(my_data1 + s * C::kShardWireBytes, tid);
      src[s] = loaded;
    }
    Vec16 reduced[kA];
    C::Reduce(src, reduced);

    // Phase 2: the reduced shard, encoded once, goes to every other rank,
    // row slot (block, my rank); my output of it comes from the same words.
    {
      const Wire w2 = C::Encode(reduced, tid);
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) {
          C::Store(w2, p.buffers[r] + p.data2 + slot(c) + p.rank * C::kShardWireBytes, tid);
        }
      }
      store_output(tile, p.rank, w2);
    }

    // The next tile's phase 1 goes out while this tile's phase 2 arrives,
    // and one fence publishes both.
    if (C::kOverlapNextTile && more) {
      phase1(tile + gridDim.x, input, ++colour, own1);
      SignalAllTwice<kWs>(p.flags2, row(c), c, p.flags1, row(colour), colour, p);
    } else {
      SignalAll<kWs>(p.flags2, row(c), c, p);
    }

    if (!WaitAll<kWs>(flags(p.flags2, c), c, p)) return;
    const char* my_data2 = p.buffers[p.rank] + p.data2 + slot(c);
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      if (s == p.rank) continue;
      store_output(tile, s, C::Load(my_data2 + s * C::kShardWireBytes, tid));
    }
    if (!C::kOverlapNextTile && more) {
      phase1(tile + gridDim.x, input, ++colour, own1);
      SignalAll<kWs>(p.flags1, row(colour), colour, p);
    }
  }
  if (tid == 0) p.colours[blockIdx.x] = colour;
}

template <WorkFormat kElem, int kWs>
KernelFn PickCodec(Codec codec) {
  switch (codec) {
    case Codec::kFp:
      return TwoShotKernel<kElem, FpCodec, kWs>;
    case Codec::kInt8:
      return TwoShotKernel<kElem, Int8Codec, kWs>;
    case Codec::kInt6:
      return TwoShotKernel<kElem, Int6Codec, kWs>;
    case Codec::kInt4:
      return TwoShotKernel<kElem, Int4Codec, kWs>;
    case Codec::kInt3:
      if constexpr (CodecRunsAtWorldSize(Codec::kInt3, kWs)) {
        return TwoShotKernel<kElem, Int3Codec, kWs>;
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

TwoShotLayout MakeTwoShotLayout(int max_blocks) {
  constexpr size_t kPage = 4096;
  auto round_up = [](size_t x) { return (x + kPage - 1) / kPage * kPage; };
  TwoShotLayout l;
  l.max_blocks = max_blocks;
  // Two rows (tile parity) of flags and slots per block.
  const size_t rows = 2 * static_cast<size_t>(max_blocks);
  const size_t flag_bytes = round_up(rows * kMaxWorldSize * 4);
  l.flags1 = 0;
  l.flags2 = flag_bytes;
  l.data1 = 2 * flag_bytes;
  l.data2 = l.data1 + rows * kTileSlotBytes;
  l.oneshot = l.data2 + rows * kTileSlotBytes;
  l.total = l.oneshot + 2 * kOneShotRegionBytes;
  return l;
}

int TwoShotGrid(size_t bytes, int max_blocks) {
  const size_t tiles = (bytes + kTileBytes - 1) / kTileBytes;
  return static_cast<int>(tiles < static_cast<size_t>(max_blocks) ? tiles : max_blocks);
}

const char* TwoShotTimingVariant() {
  if (gpu::kVariantSkipsWaits && gpu::kVariantSkipsFences) return "bare";
  if (gpu::kVariantSkipsWaits) return "no_waits";
  if (gpu::kVariantSkipsFences) return "no_fences";
  return "";
}

}  // namespace qr::kernels
