// The one-launch fused all-reduce + residual add + RMSNorm (docs/fused.md):
// the one-shot kernel's exchange (one_shot.cu: wire form, data as its own
// flag, zero after read, two phases picked by per-area call counts) with
// blocks that own whole token rows, so each block ends its rows with the
// epilogue of rmsnorm_epilogue.cu, in the same order of fp32 operations:
//
//   push      every atom of the block's token rows, to every peer's slot
//   per row   receive + sum in rank order (the one-shot all-reduce's bits),
//             residual add -> residual_out, lane sums of squares, the
//             pairwise tree, inv, norm_out from the values kept in registers
//
// Thread t owns chunk t of every row of its block (FusedBlockThreads: one
// chunk a thread, rows of at most kFusedMaxThreads chunks). Chunk c is lane
// c % 256 of the reference's sum of squares: thread l < 256 adds its own
// chunk's squares, then those of threads l + 256, l + 512, l + 768 (through
// shared memory), in the reference's order. The tree is the reference's
// pairwise tree, each warp running all of it: levels of 32 lanes and more
// in registers, the rest through shuffles, so a row costs two barriers (one
// with 256 threads). Where a block's atoms go in the receive region and why
// the plain kernel's safety argument still holds: one_shot_fused_slots.h.
// Every block waits only for the same-index block of each peer (the same
// token rows, the same slots), as in the plain kernel, so no block waits for
// a block of its own grid.
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
constexpr int kWarp = platform::kWarpSize;
static_assert(kFusedMaxThreads % kLanes == 0, "thread t is lane t % 256 of the sum of squares");
static_assert(kLanes % kWarp == 0, "a warp's lanes cover the tree's lower levels");
static_assert(kFusedSlotRowAtoms == kOneShotThreads, "a slot row is the one-shot kernel's row");

// The reference's pairwise tree over the 256 lane sums (lanes[j] +=
// lanes[j + s] for j < s, s = 128 .. 1), computed by one warp: lane i holds
// lanes i, i + W, ...; the levels s >= W add registers, the levels below
// take lane i + s by a shuffle. Lane 0 returns the root.
QR_DEVICE_INLINE float LaneTree(const float* lanes) {
  constexpr int kPer = kLanes / kWarp;
  const int i = static_cast<int>(threadIdx.x) % kWarp;
  float v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) v[k] = lanes[i + k * kWarp];
#pragma unroll
  for (int n = kPer / 2; n >= 1; n /= 2) {
#pragma unroll
    for (int k = 0; k < n; ++k) v[k] = platform::AddRn(v[k], v[k + n]);
  }
  float root = v[0];
#pragma unroll
  for (int s = kWarp / 2; s >= 1; s /= 2) {
    const float other = __uint_as_float(platform::ShuffleU32(__float_as_uint(root), i + s, kWarp));
    root = platform::AddRn(root, other);
  }
  return root;
}

// At most 64 registers a thread: a multiprocessor holds 1024 / blockDim.x
// blocks, the budget FusedMaxGrid sizes the grid for. Dynamic shared memory:
// the squares of threads 256 .. blockDim.x - 1 (FusedSquaresBytes).
//
// With one token row a block runs on one multiprocessor, so its time is
// mostly the instructions its warps issue there (an ncu profile of the
// first form: about 1000 a warp, a third of them integer divisions of the
// slot map): the map's divisions are done once a block, a row's slot once a
// row, the wire form once, and only warp 0 runs the tree and the division
// and square root, the others waiting at a barrier.
template <WorkFormat kElem, int kWs>
__global__ void __launch_bounds__(kFusedMaxThreads, 1) FusedOneShotKernel(FusedOneShotParams fp) {
  // Before anything the previous kernel may touch (the counts, the slots).
  platform::WaitForPriorKernels();
  const KernelParams& p = fp.base;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const FusedSlots slots{fp.slot_rows, p.oneshot_blocks, static_cast<int>(gridDim.x)};
  const FusedBlockMap map(slots, static_cast<int>(blockIdx.x));
  const unsigned threads = blockDim.x;
  const unsigned t = threadIdx.x;
  const unsigned chunks = static_cast<unsigned>(fp.hidden / kRmsNormChunkElems);  // <= threads
  const unsigned grid = gridDim.x;
  const unsigned rows = (static_cast<unsigned>(fp.tokens) - blockIdx.x + grid - 1) / grid;
  const bool active = t < chunks;
  // Row i of the block is token row block + i * grid; this thread's chunk of it.
  const size_t row_step = static_cast<size_t>(grid) * fp.hidden * 2;
  const size_t first = blockIdx.x * fp.hidden * 2 + static_cast<size_t>(t) * 16;

  // Loads that do not depend on the phase, in flight across the barrier.
  Vec16 in{}, res{}, weight{};
  if (active) {
    in = platform::LoadInput16(p.in + first);
    if (fp.residual != nullptr) res = platform::LoadInput16(fp.residual + first);
    weight = platform::LoadInput16(fp.weight + static_cast<size_t>(t) * 16);
  }

  __shared__ uint32_t gave_up;
  __shared__ unsigned char parity[kFusedMaxAreas];
  __shared__ float lanes[kLanes];
  __shared__ float row_inv;
  extern __shared__ float squares[];  // [8][threads - 256]
  const unsigned helpers = threads - kLanes;
  if (t == 0) gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
  // Each area this block uses: its count picks the phase of its rows, and
  // advances (nothing else in this grid touches the area's count).
  const unsigned used_areas =
      map.Row(static_cast<int>((rows * chunks - 1) / kFusedSlotRowAtoms)).area_index + 1;
  for (unsigned m = t; m < used_areas; m += threads) {
    uint32_t* count = p.oneshot_counter + blockIdx.x + m * grid;
    const uint32_t c = *count;
    *count = c + 1;
    parity[m] = static_cast<unsigned char>(c & 1u);
  }
  __syncthreads();
  if (gave_up != kGpuErrorNone) return;

  // Offset of row i's atom of this thread in a source's part of the region,
  // phase included.
  auto slot = [&](unsigned i) -> size_t {
    const unsigned j = i * chunks + t;
    const FusedSlotRow r = map.Row(static_cast<int>(j / kFusedSlotRowAtoms));
    return static_cast<size_t>(parity[r.area_index]) * kOneShotRegionBytes +
           (static_cast<size_t>(r.row) * kFusedSlotRowAtoms + j % kFusedSlotRowAtoms) * 16;
  };
  const size_t slot0 = slot(0);

  Vec16 wire0{};
  if (active) {
    for (unsigned i = 0; i < rows; ++i) {
      const Vec16 w =
          ToWire(Elem<kElem>::In(i == 0 ? in : platform::LoadInput16(p.in + first + i * row_step)));
      if (i == 0) wire0 = w;
      const size_t to = p.oneshot + (i == 0 ? slot0 : slot(i)) + p.rank * kPerSource;
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) platform::StoreRemote16(p.buffers[r] + to, w);
      }
    }
  }

  char* const mine = p.buffers[p.rank] + p.oneshot;
  const float hidden = static_cast<float>(fp.hidden);  // round to nearest, as the host
  bool ok = true;
  for (unsigned i = 0; i < rows; ++i) {
    const size_t off = first + i * row_step;
    float x[8] = {};  // residual_out's values (0 past the row or after a failed wait)
    if (active && ok) {
      Vec16 own = wire0;
      if (i > 0) {
        own = ToWire(Elem<kElem>::In(platform::LoadInput16(p.in + off)));
        if (fp.residual != nullptr) res = platform::LoadInput16(fp.residual + off);
      }
      // The one-shot all-reduce, bit for bit (one_shot.cu).
      Vec16 sum;
      ok = ReceiveSumWire<kElem, kWs>(p, mine, i == 0 ? slot0 : slot(i), own, sum);
      if (ok) {
        // The epilogue (rmsnorm_epilogue.cu), from the reduced bits.
        if (fp.residual != nullptr) {
          float b[8];
          Unpack<kBf16>(sum, x);
          Unpack<kBf16>(res, b);
#pragma unroll
          for (int e = 0; e < 8; ++e) x[e] = platform::AddRn(x[e], b[e]);
          sum = Pack<kBf16>(x);
        }
        platform::StoreOutput16(fp.residual_out + off, sum);
        Unpack<kBf16>(sum, x);
      }
    }
    // Lane t's sum: its chunks t, t + 256, ... in order, each chunk's
    // squares in order (a thread past the row, or whose wait gave up, adds 0).
    float sq[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sq[e] = platform::MulRn(x[e], x[e]);
    if (helpers > 0) {
      if (t >= kLanes) {
#pragma unroll
        for (int e = 0; e < 8; ++e) squares[e * helpers + t - kLanes] = sq[e];
      }
      __syncthreads();
    }
    if (t < kLanes) {
      float part = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) part = platform::AddRn(part, sq[e]);
      for (unsigned u = t; u < helpers; u += kLanes) {
#pragma unroll
        for (int e = 0; e < 8; ++e) part = platform::AddRn(part, squares[e * helpers + u]);
      }
      lanes[t] = part;
    }
    __syncthreads();
    if (t < kWarp) {
      const float root = LaneTree(lanes);
      if (t == 0) {
        const float mean = platform::DivRn(root, hidden);
        row_inv = platform::DivRn(1.0f, platform::SqrtRn(platform::AddRn(mean, fp.eps)));
      }
    }
    // The tree has read the lanes and the inverse is written: the next row
    // may write the lanes and squares again.
    __syncthreads();
    const float inv = row_inv;
    if (active && ok) {
      float w[8];
      Unpack<kBf16>(weight, w);
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

size_t FusedSquaresBytes(int threads) {
  return threads > kLanes ? static_cast<size_t>(threads - kLanes) * kRmsNormChunkElems * 4 : 0;
}

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
