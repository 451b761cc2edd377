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
  static_assert(C::kShardWireBytes * kWs <= static_cast<size_t>(kTileSlotBytes), "slot too small");

  // A rank that gave up drains every later call at once (sticky error). One
  // thread reads the flag (device memory) for the whole block.
  __shared__ uint32_t gave_up;
  __shared__ uint4 stage_words[kTwoShotStageBytes / 16];  // 16-byte aligned
  char* stage = reinterpret_cast<char*>(stage_words);
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
  auto row = [&](uint32_t colour) { return blockIdx.x * 2 + (colour & 1u); };
  auto flags = [&](size_t offset, uint32_t colour) {
    return reinterpret_cast<const uint32_t*>(p.buffers[p.rank] + offset) +
           row(colour) * kMaxWorldSize;
  };
  auto slot = [&](uint32_t colour) { return static_cast<size_t>(row(colour)) * kTileSlotBytes; };

  // This thread's input atoms of `tile`; atoms past the end read as zero
  // (sizes are whole atoms). A prefetch keeps them as stored (converting
  // would wait for the loads), else they are converted at once (converting
  // later kept more registers live: the bf16-cast INT6 kernel at world size
  // 8 spilled).
  auto load_input = [&](int tile, Vec16(&atoms)[kTwoShotAtoms]) {
    const size_t base = static_cast<size_t>(tile) * kTileBytes + tid * 16;
#pragma unroll
    for (int i = 0; i < kTwoShotAtoms; ++i) {
      const size_t off = base + i * kAtomStride;
      if constexpr (C::kPrefetchInput) {
        atoms[i] = off < p.bytes ? platform::LoadInput16(p.in + off) : Vec16{};
      } else {
        atoms[i] = off < p.bytes ? Elem<kElem>::In(platform::LoadInput16(p.in + off)) : Vec16{};
      }
    }
  };
  auto work_atom = [&](const Vec16& atom) {
    if constexpr (C::kPrefetchInput) return Elem<kElem>::In(atom);
    return atom;
  };

  // Phase 1 of a tile whose input atoms are `atoms`: shard r goes to rank
  // r, row slot (block, my rank). The caller raises the flags.
  auto phase1 = [&](const Vec16(&atoms)[kTwoShotAtoms], uint32_t colour) {
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      Vec16 shard[kA];
#pragma unroll
      for (int k = 0; k < kA; ++k) shard[k] = work_atom(atoms[r * kA + k]);
      C::Encode(shard, p.buffers[r] + p.data1 + slot(colour) + p.rank * C::kShardWireBytes, tid,
                stage);
    }
  };

  uint32_t colour = p.colours[blockIdx.x] + 1;
  int tile = blockIdx.x;  // < num_tiles: the grid never exceeds the tiles
  Vec16 input[kTwoShotAtoms];
  load_input(tile, input);
  phase1(input, colour);
  SignalAll<kWs>(p.flags1, row(colour), colour, p);
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    const bool more = tile + static_cast<int>(gridDim.x) < p.num_tiles;
    if (C::kPrefetchInput && more) load_input(tile + gridDim.x, input);
    if (!WaitAll<kWs>(flags(p.flags1, c), c, p)) return;

    // Reduce my shard in rank order 0..ws-1.
    const char* my_data1 = p.buffers[p.rank] + p.data1 + slot(c);
    float acc[kA][8];
    C::Decode(my_data1, tid, acc);
#pragma unroll
    for (int s = 1; s < kWs; ++s) {
      float v[kA][8];
      C::Decode(my_data1 + s * C::kShardWireBytes, tid, v);
#pragma unroll
      for (int k = 0; k < kA; ++k) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[k][e] = C::Accumulate(acc[k][e], v[k][e]);
      }
    }
    Vec16 reduced[kA];
#pragma unroll
    for (int k = 0; k < kA; ++k) reduced[k] = Pack<kBf16>(acc[k]);

    // Phase 2: the reduced shard goes to every rank, row slot (block, my rank).
    char* dst2[kWs];
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      dst2[r] = p.buffers[r] + p.data2 + slot(c) + p.rank * C::kShardWireBytes;
    }
    C::template EncodeToAll<kWs>(reduced, dst2, tid, stage);

    // The next tile's phase 1 goes out while this tile's phase 2 arrives,
    // and one fence publishes both.
    if (C::kOverlapNextTile && more) {
      load_input(tile + gridDim.x, input);
      phase1(input, ++colour);
      SignalAllTwice<kWs>(p.flags2, row(c), c, p.flags1, row(colour), colour, p);
    } else {
      SignalAll<kWs>(p.flags2, row(c), c, p);
    }

    if (!WaitAll<kWs>(flags(p.flags2, c), c, p)) return;
    const char* my_data2 = p.buffers[p.rank] + p.data2 + slot(c);
    const size_t base = static_cast<size_t>(tile) * kTileBytes + tid * 16;
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      Vec16 v[kA];
      C::DecodePacked(my_data2 + s * C::kShardWireBytes, tid, v);
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        const size_t off = base + (s * kA + k) * kAtomStride;
        if (off < p.bytes) platform::StoreOutput16(p.out + off, Elem<kElem>::Out(v[k]));
      }
    }
    if (!C::kOverlapNextTile && more) {
      if (!C::kPrefetchInput) load_input(tile + gridDim.x, input);
      phase1(input, ++colour);
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
