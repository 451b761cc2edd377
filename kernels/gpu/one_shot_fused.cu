// The one-launch fused all-reduce + residual add + RMSNorm (docs/fused.md):
// the one-shot kernel's exchange (one_shot.cu: wire form, data as its own
// flag, zero after read, two phases picked by per-area call counts) with
// blocks that own whole token rows, so each block ends its rows with the
// epilogue of rmsnorm_epilogue.cu, in the same order of fp32 operations:
//
//   push      every atom of the block's token rows, to every peer's slot
//   per row   receive + sum in rank order (the one-shot all-reduce's bits),
//             residual add -> residual_out, lane t's sum of squares,
//             the shared-memory tree, inv, norm_out from residual_out
//
// Thread t handles chunks t, t + T, ... of every row (T threads,
// FusedBlockThreads: one chunk each up to 8192 values a row); chunk c is
// lane c % 256 of the reference's sum of squares, and the lanes add their
// chunks' squares in order through shared memory. Where a block's atoms go
// in the receive region and why the plain kernel's safety argument still
// holds: one_shot_fused_slots.h. Every block waits only for the same-index block
// of each peer (the same token rows, the same slots), as in the plain
// kernel, so no block waits for a block of its own grid.
#include <hip/hip_runtime.h>

#include "kernels/gpu/one_shot_device.cuh"
#include "kernels/gpu/one_shot_fused.cuh"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/launch.cuh"
#include "kernels/rmsnorm_lanes.h"

namespace qr::kernels::gpu {
namespace {

constexpr int kLanes = kRmsNormLanes;
static_assert(kFusedMaxThreads % kLanes == 0, "thread t is lane t % 256 of the sum of squares");
static_assert(kFusedSlotRowAtoms == kOneShotThreads, "a slot row is the one-shot kernel's row");

// One block of kFusedMaxThreads per multiprocessor at least (at most 64
// registers a thread): FusedMaxGrid sizes the grid for that.
template <WorkFormat kElem, int kWs>
__global__ void __launch_bounds__(kFusedMaxThreads, 1) FusedOneShotKernel(FusedOneShotParams fp) {
  // Before anything the previous kernel may touch (the counts, the slots).
  platform::WaitForPriorKernels();
  const KernelParams& p = fp.base;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const FusedSlots slots{fp.slot_rows, p.oneshot_blocks, static_cast<int>(gridDim.x)};
  const int block = static_cast<int>(blockIdx.x);
  const int threads = static_cast<int>(blockDim.x);  // FusedBlockThreads(hidden)
  const int t = static_cast<int>(threadIdx.x);
  const size_t chunks = fp.hidden / kRmsNormChunkElems;
  const size_t my_tokens =
      static_cast<size_t>(FusedBlockTokens(static_cast<int64_t>(fp.tokens), slots.grid, block));
  const int64_t need = FusedBlockNeed(static_cast<int64_t>(fp.tokens),
                                      static_cast<int64_t>(fp.hidden), slots.grid, block);
  const int used_areas = FusedLocalRow(slots, block, need - 1).area_index + 1;

  __shared__ uint32_t gave_up;
  __shared__ unsigned char parity[kFusedMaxAreas];
  __shared__ float lanes[kLanes];
  // The squares of one pass over a row (thread u's chunk), so that lane j
  // adds those of chunks j, j + 256, ... in order, as the reference does.
  __shared__ float squares[kRmsNormChunkElems][kFusedMaxThreads];
  if (t == 0) gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
  // Each area this block uses: its count picks the phase of its rows, and
  // advances (nothing else in this grid touches the area's count).
  for (int m = t; m < used_areas; m += threads) {
    uint32_t* count = p.oneshot_counter + block + m * slots.grid;
    const uint32_t c = *count;
    *count = c + 1;
    parity[m] = static_cast<unsigned char>(c & 1u);
  }
  __syncthreads();
  if (gave_up != kGpuErrorNone) return;

  // Offset of local atom j in a source's part of the region, phase included.
  auto slot = [&](size_t j) -> size_t {
    const FusedSlotRow r =
        FusedLocalRow(slots, block, static_cast<int64_t>(j / kFusedSlotRowAtoms));
    return static_cast<size_t>(parity[r.area_index]) * kOneShotRegionBytes +
           (static_cast<size_t>(r.row) * kFusedSlotRowAtoms + j % kFusedSlotRowAtoms) * 16;
  };
  auto row_bytes = [&](size_t i) {
    return (static_cast<size_t>(block) + i * static_cast<size_t>(slots.grid)) * fp.hidden * 2;
  };

  for (size_t i = 0; i < my_tokens; ++i) {
    for (size_t c = t; c < chunks; c += threads) {
      const Vec16 w = ToWire(Elem<kElem>::In(platform::LoadInput16(p.in + row_bytes(i) + c * 16)));
      const size_t to = p.oneshot + slot(i * chunks + c) + p.rank * kPerSource;
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) platform::StoreRemote16(p.buffers[r] + to, w);
      }
    }
  }

  char* const mine = p.buffers[p.rank] + p.oneshot;
  const float hidden = static_cast<float>(fp.hidden);  // round to nearest, as the host
  // A row of at most `threads` chunks is one pass: its residual_out values
  // stay in registers for the norm.
  const bool one_pass = chunks <= static_cast<size_t>(threads);
  bool ok = true;
  for (size_t i = 0; i < my_tokens; ++i) {
    const size_t row = row_bytes(i);
    float part = 0.0f;  // lane t's sum of squares (t < kLanes)
    Vec16 kept{};
    Vec16 weight{};
    // Every thread runs every pass (the barriers); a thread past the row's
    // chunks, or one whose wait gave up, adds nothing and stores nothing.
    for (size_t base = 0; base < chunks; base += threads) {
      const size_t c = base + t;
      const bool mine_chunk = c < chunks && ok;
      if (mine_chunk) {
        const size_t off = row + c * 16;
        // Issued before the waits, so their latency hides behind them.
        const Vec16 res =
            fp.residual != nullptr ? platform::LoadInput16(fp.residual + off) : Vec16{};
        if (one_pass) weight = platform::LoadInput16(fp.weight + c * 16);
        const size_t from = slot(i * chunks + c);
        // The one-shot all-reduce, bit for bit (one_shot.cu).
        Vec16 x;
        ok = ReceiveSum<kElem, kWs>(p, mine, from, platform::LoadInput16(p.in + off), x);
        if (ok) {
          // The epilogue (rmsnorm_epilogue.cu), from the reduced bits.
          if (fp.residual != nullptr) {
            float a[8], b[8];
            Unpack<kBf16>(x, a);
            Unpack<kBf16>(res, b);
#pragma unroll
            for (int e = 0; e < 8; ++e) a[e] = platform::AddRn(a[e], b[e]);
            x = Pack<kBf16>(a);
          }
          platform::StoreOutput16(fp.residual_out + off, x);
          kept = x;
          float sq[8];
          Unpack<kBf16>(x, sq);
#pragma unroll
          for (int e = 0; e < 8; ++e) squares[e][t] = platform::MulRn(sq[e], sq[e]);
        }
      }
      __syncthreads();
      if (t < kLanes) {
        for (int u = t; u < threads && base + u < chunks; u += kLanes) {
#pragma unroll
          for (int e = 0; e < 8; ++e) part = platform::AddRn(part, squares[e][u]);
        }
      }
      __syncthreads();  // the squares are read before the next pass writes them
    }
    if (t < kLanes) lanes[t] = part;
    __syncthreads();
    for (int s = kLanes / 2; s >= 1; s /= 2) {
      if (t < s) lanes[t] = platform::AddRn(lanes[t], lanes[t + s]);
      __syncthreads();
    }
    const float mean = platform::DivRn(lanes[0], hidden);
    const float inv = platform::DivRn(1.0f, platform::SqrtRn(platform::AddRn(mean, fp.eps)));
    __syncthreads();  // everyone has read lanes[0] before the next row writes it
    for (size_t c = t; c < chunks && ok; c += threads) {
      const size_t off = row + c * 16;
      float x[8], w[8];
      // This thread stored these values above: its own writes are visible.
      Unpack<kBf16>(one_pass ? kept : platform::LoadInput16(fp.residual_out + off), x);
      Unpack<kBf16>(one_pass ? weight : platform::LoadInput16(fp.weight + c * 16), w);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = platform::MulRn(platform::MulRn(x[e], inv), w[e]);
      platform::StoreOutput16(p.out + off, Pack<kBf16>(x));
    }
  }
}

template <WorkFormat kElem>
FusedKernelFn ForWs(int ws) {
  switch (ws) {
    case 2:
      return FusedOneShotKernel<kElem, 2>;
    case 4:
      return FusedOneShotKernel<kElem, 4>;
    case 8:
      return FusedOneShotKernel<kElem, 8>;
  }
  return nullptr;
}

}  // namespace

FusedKernelFn FusedOneShotKernelFor(WorkFormat elem, int ws) {
  switch (elem) {
    case WorkFormat::kFp16:
      return ForWs<WorkFormat::kFp16>(ws);
    case WorkFormat::kBf16:
    case WorkFormat::kBf16Cast:
      return ForWs<WorkFormat::kBf16>(ws);
  }
  return nullptr;
}

}  // namespace qr::kernels::gpu
