// The one-shot all-reduce kernel (kernels/one_shot_reference.h is the spec).
//
// Thread t of block b handles atoms (16 bytes) b * 256 + t, + grid * 256, ...
// It pushes each atom's wire form (NOT of the work-dtype bits, never zero)
// into every peer's region [phase][source = me], then, atom by atom, polls its
// own region until each peer's atom is non-zero in every 16-bit lane, zeroes
// it again for the call after next, and sums the ws values in rank order.
// The data is its own flag: no fence, no release/acquire round trip, one hop.
//
// Why zeroing right after reading is safe with two phases: a peer writes
// phase k again only in call n + 2, and its kernel n + 2 starts after its
// kernel n + 1 finished, which needed our data of call n + 1, which our
// kernel n + 1 sent after our kernel n (and its clears) completed. Only
// same-index blocks depend on each other, as in the two-shot kernel.
#include <hip/hip_runtime.h>

#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {
namespace {

// All 8 lanes non-zero: every 16-bit value of the atom has landed (a torn
// 16-byte store shows zero lanes and is polled again).
QR_DEVICE_INLINE bool Arrived(const Vec16& v) {
  bool ok = true;
#pragma unroll
  for (int i = 0; i < 4; ++i) ok = ok && (v.w[i] & 0xFFFFu) != 0 && (v.w[i] >> 16) != 0;
  return ok;
}

// Input bits -> wire form: 0xFFFF becomes 0xFFFE (both NaN), then NOT.
QR_DEVICE_INLINE Vec16 ToWire(const Vec16& v) {
  Vec16 r;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t w = v.w[i];
    if ((w & 0xFFFFu) == 0xFFFFu) w ^= 0x1u;
    if ((w >> 16) == 0xFFFFu) w ^= 0x10000u;
    r.w[i] = ~w;
  }
  return r;
}

QR_DEVICE_INLINE Vec16 FromWire(const Vec16& v) {
  return Vec16{{~v.w[0], ~v.w[1], ~v.w[2], ~v.w[3]}};
}

// Polls *src until the atom arrived. False when the wait gives up. The
// timing variants that skip waits take whatever is there (wrong results), so
// that one rank's kernel can be timed alone (tools/kernel_cost.h).
QR_DEVICE_INLINE bool Receive(const char* src, Vec16& v, const KernelParams& p) {
  v = platform::LoadShared16(src);
  if (kVariantSkipsWaits || Arrived(v)) return true;
  const uint64_t start = platform::WallClock();
  uint32_t spins = 0;
  for (;;) {
    v = platform::LoadShared16(src);
    if (Arrived(v)) return true;
    if ((++spins & 63u) == 0 && ShouldGiveUp(start, p)) return false;
    platform::PollPause();
  }
}

// Grids larger than this gate their polling (below).
inline constexpr unsigned kOneShotGateBlocks = 4;

template <WorkFormat kElem, int kWs>
__global__ void __launch_bounds__(kOneShotThreads) OneShotKernel(KernelParams p) {
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  __shared__ uint32_t gave_up, call;
  if (threadIdx.x == 0) {
    gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
    call = *p.oneshot_counter;  // written by the previous call's last block
  }
  __syncthreads();
  if (gave_up != kGpuErrorNone) return;

  const size_t phase = (call & 1u) * static_cast<size_t>(kOneShotRegionBytes);
  const size_t atoms = p.bytes / 16;
  const size_t first = static_cast<size_t>(blockIdx.x) * kOneShotThreads + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * kOneShotThreads;
  const size_t my_slot = p.oneshot + phase + p.rank * kPerSource;

  for (size_t a = first; a < atoms; a += stride) {
    const Vec16 w = ToWire(Elem<kElem>::In(platform::LoadInput16(p.in + a * 16)));
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      if (r != p.rank) platform::StoreRemote16(p.buffers[r] + my_slot + a * 16, w);
    }
  }

  char* const mine = p.buffers[p.rank] + p.oneshot + phase;
  // While the peers' data is still on its way only thread 0 polls (its own
  // first atom of each source); the others wait at the barrier. Thousands of
  // threads polling the very lines the peers are writing slow the arrival
  // down when one rank starts well before the other; with a few blocks the
  // barrier costs more than the polling does (docs/performance.md,
  // "Measurements behind the kernels' choices").
  bool ok = true;
  if (gridDim.x > kOneShotGateBlocks) {  // the same on every thread
    __shared__ uint32_t gate_ok;
    if (threadIdx.x == 0) {
      bool arrived = true;
#pragma unroll
      for (int s = 0; s < kWs; ++s) {
        Vec16 v;
        if (s != p.rank && arrived) arrived = Receive(mine + s * kPerSource + first * 16, v, p);
      }
      gate_ok = arrived ? 1u : 0u;
    }
    __syncthreads();
    ok = gate_ok != 0;
  }
  for (size_t a = first; a < atoms && ok; a += stride) {
    float acc[8];
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      if (!ok) continue;  // not break: the loop must stay unrollable
      Vec16 v;
      if (s == p.rank) {
        v = FromWire(ToWire(Elem<kElem>::In(platform::LoadInput16(p.in + a * 16))));
      } else {
        char* src = mine + s * kPerSource + a * 16;
        ok = Receive(src, v, p);
        platform::StoreRemote16(src, Vec16{});
        v = FromWire(v);
      }
      float f[8];
      Unpack<kBf16>(v, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = s == 0 ? f[e] : platform::AddRn(acc[e], f[e]);
    }
    if (ok) platform::StoreOutput16(p.out + a * 16, Elem<kElem>::Out(Pack<kBf16>(acc)));
  }

  // The last block to finish advances the call counter for the next call.
  if (__syncthreads_or(ok ? 0 : 1) != 0) return;
  if (threadIdx.x == 0 && atomicAdd(p.oneshot_done, 1u) == gridDim.x - 1) {
    *p.oneshot_done = 0;
    *p.oneshot_counter = call + 1;
  }
}

template <WorkFormat kElem>
KernelFn ForWs(int ws) {
  switch (ws) {
    case 2:
      return OneShotKernel<kElem, 2>;
    case 4:
      return OneShotKernel<kElem, 4>;
    case 8:
      return OneShotKernel<kElem, 8>;
  }
  return nullptr;
}

}  // namespace

KernelFn OneShotKernelFor(WorkFormat elem, int ws) {
  switch (elem) {
    case WorkFormat::kFp16:
      return ForWs<WorkFormat::kFp16>(ws);
    // The cast only serves quantized wire formats; one-shot sends exact
    // bf16 values (kernels/one_shot_reference.h).
    case WorkFormat::kBf16:
    case WorkFormat::kBf16Cast:
      return ForWs<WorkFormat::kBf16>(ws);
  }
  return nullptr;
}

int OneShotGrid(size_t bytes, int max_blocks) {
  const size_t per_block = static_cast<size_t>(kOneShotThreads) * 16;
  const size_t blocks = (bytes + per_block - 1) / per_block;
  return static_cast<int>(blocks < static_cast<size_t>(max_blocks) ? blocks : max_blocks);
}

}  // namespace qr::kernels::gpu
