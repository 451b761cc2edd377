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
// Thread t handles chunks t, t + 256, ... of every row: lane t of the
// reference's sum of squares. Where a block's atoms go in the receive region
// and why the plain kernel's safety argument still holds:
// one_shot_fused_slots.h. Every block waits only for the same-index block
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
static_assert(kLanes == kOneShotThreads, "thread t is lane t of the sum of squares");
static_assert(kFusedSlotRowAtoms == kOneShotThreads, "a slot row is the one-shot kernel's row");

// Two blocks per multiprocessor at least (at most 128 registers a thread):
// ranks sharing a GPU size their grids for that many (max_blocks_shared.h).
template <WorkFormat kElem, int kWs>
__global__ void __launch_bounds__(kOneShotThreads, kTwoShotFpBlocksPerSm)
    FusedOneShotKernel(FusedOneShotParams fp) {
  // Before anything the previous kernel may touch (the counts, the slots).
  platform::WaitForPriorKernels();
  const KernelParams& p = fp.base;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const FusedSlots slots{fp.slot_rows, p.oneshot_blocks, static_cast<int>(gridDim.x)};
  const int block = static_cast<int>(blockIdx.x);
  const size_t chunks = fp.hidden / kRmsNormChunkElems;
  const size_t my_tokens =
      static_cast<size_t>(FusedBlockTokens(static_cast<int64_t>(fp.tokens), slots.grid, block));
  const int64_t need = FusedBlockNeed(static_cast<int64_t>(fp.tokens),
                                      static_cast<int64_t>(fp.hidden), slots.grid, block);
  const int used_areas = FusedLocalRow(slots, block, need - 1).area_index + 1;

  __shared__ uint32_t gave_up;
  __shared__ unsigned char parity[kFusedMaxAreas];
  __shared__ float lanes[kLanes];
  if (threadIdx.x == 0) gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
  // Each area this block uses: its count picks the phase of its rows, and
  // advances (nothing else in this grid touches the area's count).
  for (int m = threadIdx.x; m < used_areas; m += kOneShotThreads) {
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
    for (size_t c = threadIdx.x; c < chunks; c += kOneShotThreads) {
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
  bool ok = true;
  for (size_t i = 0; i < my_tokens; ++i) {
    const size_t row = row_bytes(i);
    float part = 0.0f;
    for (size_t c = threadIdx.x; c < chunks && ok; c += kOneShotThreads) {
      const size_t off = row + c * 16;
      const size_t from = slot(i * chunks + c);
      // The one-shot all-reduce, bit for bit (one_shot.cu).
      Vec16 x;
      ok = ReceiveSum<kElem, kWs>(p, mine, from, platform::LoadInput16(p.in + off), x);
      if (!ok) break;
      // The epilogue (rmsnorm_epilogue.cu), from the reduced bits.
      if (fp.residual != nullptr) {
        float a[8], b[8];
        Unpack<kBf16>(x, a);
        Unpack<kBf16>(platform::LoadInput16(fp.residual + off), b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] = platform::AddRn(a[e], b[e]);
        x = Pack<kBf16>(a);
      }
      platform::StoreOutput16(fp.residual_out + off, x);
      float sq[8];
      Unpack<kBf16>(x, sq);
#pragma unroll
      for (int e = 0; e < 8; ++e) part = platform::AddRn(part, platform::MulRn(sq[e], sq[e]));
    }
    lanes[threadIdx.x] = part;
    __syncthreads();
    for (unsigned s = kLanes / 2; s >= 1; s /= 2) {
      if (threadIdx.x < s) {
        lanes[threadIdx.x] = platform::AddRn(lanes[threadIdx.x], lanes[threadIdx.x + s]);
      }
      __syncthreads();
    }
    const float mean = platform::DivRn(lanes[0], hidden);
    const float inv = platform::DivRn(1.0f, platform::SqrtRn(platform::AddRn(mean, fp.eps)));
    __syncthreads();  // everyone has read lanes[0] before the next row writes it
    for (size_t c = threadIdx.x; c < chunks && ok; c += kOneShotThreads) {
      const size_t off = row + c * 16;
      float x[8], w[8];
      // This thread stored these values above: its own writes are visible.
      Unpack<kBf16>(platform::LoadInput16(fp.residual_out + off), x);
      Unpack<kBf16>(platform::LoadInput16(fp.weight + c * 16), w);
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
