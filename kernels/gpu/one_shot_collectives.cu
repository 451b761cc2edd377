// The one-shot reduce-scatter and all-gather: what RankState runs for a call
// the policy sends one-shot (kernels/gpu/collective_request.h), in one hop
// with the data as its own flag, as the one-shot all-reduce (one_shot.cu).
// Their bits are the references' for kOneShot (exact values):
//
//   reduce-scatter  rank p stores chunk q of its input (q != p) in the
//                   one-shot wire form into rank q's region, source p; rank
//                   q sums its own chunk and the ws - 1 received ones in rank
//                   order (ReceiveSum, the one-shot all-reduce's own sum)
//                   into its output;
//   all-gather      rank p stores its input, every value widened to a word
//                   with no zero lane (one_shot_collective_wire.h), into
//                   every peer's region, source p, and copies it to its own
//                   chunk of the output; each peer's words, as they arrive,
//                   go to that peer's chunk, bits unchanged.
//
// Slots, phases and blocks: a source's wire atoms lie in its part of the
// region as the plain kernel's message of the same bytes (atom a at byte
// a * 16; block b owns rows b, b + S, ...; BeginOneShotBlock advances b's
// count). In every run of block b every rank sends to and receives from
// every peer at least row b's first atom, because every chunk has the same
// size: exactly what one_shot.cu's argument for zeroing after the read
// needs, so these calls and plain or fused one-shot all-reduces follow each
// other in any order on the same region and counts. Only same-index blocks
// of the ranks wait on each other.
//
// KernelParams of such a call: p.bytes is the per-rank chunk's size (count
// * 2, a multiple of 16), in and out as the collective names them; the grid
// is OneShotGrid of OneShotCollectiveWireBytes. In-place forms: a
// reduce-scatter's thread reads its own chunk's atom before it writes the
// same address (no other thread reads it); an all-gather whose input is its
// own chunk of the output skips the copy.
#include <hip/hip_runtime.h>

#include "kernels/gpu/collective_kernels.cuh"
#include "kernels/gpu/one_shot_collective_wire.h"
#include "kernels/gpu/one_shot_device.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/launch.cuh"

namespace qr::kernels::gpu {
namespace {

template <WorkFormat kElem, int kWs>
__global__ void __launch_bounds__(kOneShotThreads) OneShotReduceScatterKernel(KernelParams p) {
  // Before anything the previous kernel may touch: the counts, the slots.
  platform::WaitForPriorKernels();
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const size_t atoms = p.bytes / 16;  // of one chunk
  const size_t first = static_cast<size_t>(blockIdx.x) * kOneShotThreads + threadIdx.x;
  const size_t stride = static_cast<size_t>(p.oneshot_blocks) * kOneShotThreads;
  size_t phase;
  if (!BeginOneShotBlock(p, phase)) return;
  const size_t my_slot = p.oneshot + phase + p.rank * kPerSource;

  for (size_t a = first; a < atoms; a += stride) {
#pragma unroll
    for (int q = 0; q < kWs; ++q) {
      if (q == p.rank) continue;
      const Vec16 in = platform::LoadInput16(p.in + q * p.bytes + a * 16);
      platform::StoreRemote16(p.buffers[q] + my_slot + a * 16, ToWire(Elem<kElem>::In(in)));
    }
  }

  char* const mine = p.buffers[p.rank] + p.oneshot + phase;
  const char* const own = p.in + p.rank * p.bytes;
  bool ok = OneShotGate<kWs>(p, mine, atoms, stride);
  for (size_t a = first; a < atoms && ok; a += stride) {
    Vec16 sum;
    ok = ReceiveSum<kElem, kWs>(p, mine, a * 16, platform::LoadInput16(own + a * 16), sum);
    if (ok) platform::StoreOutput16(p.out + a * 16, sum);
  }
}

// Half `h` of an input atom (its values 4h..4h+3) as one wire atom.
QR_DEVICE_INLINE Vec16 GatherWire(const Vec16& in, int h) {
  const uint32_t lo = in.w[2 * h];
  const uint32_t hi = in.w[2 * h + 1];
  return Vec16{{GatherWireOfValue(lo & 0xFFFFu), GatherWireOfValue(lo >> 16),
                GatherWireOfValue(hi & 0xFFFFu), GatherWireOfValue(hi >> 16)}};
}

// 8 bytes of the caller's output (an all-gather's wire atom carries 4 values).
QR_DEVICE_INLINE void StoreOutput8(char* p, uint32_t lo, uint32_t hi) {
  *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
}

template <int kWs>
__global__ void __launch_bounds__(kOneShotThreads) OneShotAllGatherKernel(KernelParams p) {
  platform::WaitForPriorKernels();
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const size_t atoms = 2 * (p.bytes / 16);  // wire atoms: two per input atom
  const size_t first = static_cast<size_t>(blockIdx.x) * kOneShotThreads + threadIdx.x;
  const size_t stride = static_cast<size_t>(p.oneshot_blocks) * kOneShotThreads;
  size_t phase;
  if (!BeginOneShotBlock(p, phase)) return;
  const size_t my_slot = p.oneshot + phase + p.rank * kPerSource;
  char* const own_chunk = p.out + p.rank * p.bytes;
  const bool in_place = p.in == own_chunk;

  for (size_t a = first; a < atoms; a += stride) {
    const size_t at = static_cast<size_t>(GatherChunkByteOffset(static_cast<int64_t>(a)));
    const Vec16 in = platform::LoadInput16(p.in + at / 16 * 16);
    const int h = static_cast<int>(a % 2);
    const Vec16 w = GatherWire(in, h);
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      if (r != p.rank) platform::StoreRemote16(p.buffers[r] + my_slot + a * 16, w);
    }
    if (!in_place) StoreOutput8(own_chunk + at, in.w[2 * h], in.w[2 * h + 1]);
  }

  char* const mine = p.buffers[p.rank] + p.oneshot + phase;
  bool ok = OneShotGate<kWs>(p, mine, atoms, stride);
  for (size_t a = first; a < atoms && ok; a += stride) {
    const size_t at = static_cast<size_t>(GatherChunkByteOffset(static_cast<int64_t>(a)));
    const PeerAtoms<kWs> peers = LoadPeerAtoms<kWs>(p, mine, a * 16);
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      if (s == p.rank || !ok) continue;  // not break: the loop must stay unrollable
      char* src = SourceAtom<kWs>(mine, s, a * 16);
      Vec16 v = PeerAtomOfRank(peers, s, p.rank);
      ok = Await(src, v, p);
      platform::StoreRemote16(src, Vec16{});
      if (!ok) continue;
      const uint32_t lo = GatherValueOfWire(v.w[0]) | (GatherValueOfWire(v.w[1]) << 16);
      const uint32_t hi = GatherValueOfWire(v.w[2]) | (GatherValueOfWire(v.w[3]) << 16);
      StoreOutput8(p.out + s * p.bytes + at, lo, hi);
    }
  }
}

template <WorkFormat kElem>
KernelFn ReduceScatterForWs(int ws) {
  switch (ws) {
    case 2:
      return OneShotReduceScatterKernel<kElem, 2>;
    case 4:
      return OneShotReduceScatterKernel<kElem, 4>;
    case 8:
      return OneShotReduceScatterKernel<kElem, 8>;
  }
  return nullptr;
}

}  // namespace

KernelFn OneShotReduceScatterKernelFor(WorkFormat elem, int ws) {
  switch (elem) {
    case WorkFormat::kFp16:
      return ReduceScatterForWs<WorkFormat::kFp16>(ws);
    // Exact values: the cast is off (ReduceScatterParamsFor, kOneShot).
    case WorkFormat::kBf16:
    case WorkFormat::kBf16Cast:
      return ReduceScatterForWs<WorkFormat::kBf16>(ws);
  }
  return nullptr;
}

KernelFn OneShotAllGatherKernelFor(int ws) {
  switch (ws) {
    case 2:
      return OneShotAllGatherKernel<2>;
    case 4:
      return OneShotAllGatherKernel<4>;
    case 8:
      return OneShotAllGatherKernel<8>;
  }
  return nullptr;
}

}  // namespace qr::kernels::gpu
