// The one-launch fused all-reduce + residual add + RMSNorm (docs/fused.md):
// the one-shot kernel's exchange (one_shot.cu: wire form, data as its own
// flag, zero after read, two phases picked by per-area call counts) with
// blocks that own whole token rows or parts of them, so each block ends its
// rows with the epilogue of rmsnorm_epilogue.cu, in the same order of fp32
// operations:
//
//   push      every atom of the block's token rows, to every peer's slot
//   per row   receive + sum in rank order (the one-shot all-reduce's bits),
//             residual add -> residual_out, the lane sums of squares, the
//             pairwise tree, inv, norm_out from the values kept in registers
//
// A row is split over P blocks (FusedSlots::parts; one_shot_fused_slots.h
// FusedThreads says which chunk each thread takes): part p owns the lanes
// [p * 256 / P, (p + 1) * 256 / P) of the reference's sum of squares and all
// their chunks, so a lane's squares are added in order inside one block
// (the owner thread, u < 256 / P, adds its chunk's, then those of its
// helpers u + 256 / P, ... through shared memory). The tree needs every
// lane: each part stores its lane sums into every other part's inbox (its
// own rank's buffer, TwoShotLayout::fused_lanes, one inbox per token row
// and part, so none is reused within a call), and warp 0 of each part reads
// them (polling, zeroing after the read, like the one-shot slots), runs the
// reference's pairwise tree and the inverse. So a row of 8192 values runs
// on 4 multiprocessors instead of one (with one token row, one block's
// multiprocessor issuing all of a row's instructions was most of the
// kernel's time). Every part is in the same grid, resident at once
// (FusedMaxGrid), and waits only for its own row's parts and for the
// same-index block of each peer, as in the plain kernel.
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

// A lane sum between the parts of a row: NOT of its bits, never zero (the
// all-ones NaN becomes another NaN first), so zero marks an empty word.
QR_DEVICE_INLINE uint32_t LaneToWire(float v) {
  const uint32_t b = __float_as_uint(v);
  return ~(b == 0xFFFFFFFFu ? 0xFFFFFFFEu : b);
}

// Waits for an inbox word whose first load gave w (polling again while it
// is zero), zeroes it and decodes the lane sum. False when the wait gave
// up (the sticky error is set).
QR_DEVICE_INLINE bool ReceiveLane(uint32_t* word, uint32_t w, float& v, const KernelParams& p) {
  if (!kVariantSkipsWaits && w == 0) {
    const uint64_t start = platform::WallClock();
    for (uint32_t spins = 1;; ++spins) {
      w = platform::LoadShared32(word);
      if (w != 0) break;
      if ((spins & 63u) == 0 && ShouldGiveUp(start, p)) return false;
      if (spins > kOneShotSpinPolls) platform::PollPause();
    }
  }
  platform::StoreRemote32(word, 0);
  v = __uint_as_float(~w);
  return true;
}

// The reference's pairwise tree over the 256 lane sums (lanes[j] +=
// lanes[j + s] for j < s, s = 128 .. 1), computed by one warp whose lane i
// holds v[k] = lane sum i + k W: the levels s >= W add registers, the levels
// below take lane i + s by a shuffle. Lane 0 returns the root.
constexpr int kTreePer = kLanes / kWarp;
QR_DEVICE_INLINE float LaneTree(float (&v)[kTreePer]) {
  const int i = static_cast<int>(threadIdx.x) % kWarp;
#pragma unroll
  for (int n = kTreePer / 2; n >= 1; n /= 2) {
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
// the squares of the part's helper threads (FusedSquaresBytes). Divisions
// of the slot map are done once a block, a row's slot once a row, the wire
// form once, and only warp 0 runs the tree, the division and the square
// root (the first form's warps issued about 1000 instructions each, a third
// of them integer divisions).
template <WorkFormat kElem, int kWs, int kParts>
__global__ void __launch_bounds__(kFusedMaxThreads, 1) FusedOneShotKernel(FusedOneShotParams fp) {
  // Before anything the previous kernel may touch (the counts, the slots).
  platform::WaitForPriorKernels();
  const KernelParams& p = fp.base;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const FusedSlots slots{fp.slot_rows, p.oneshot_blocks, static_cast<int>(gridDim.x), kParts};
  const FusedBlockMap map(slots, static_cast<int>(blockIdx.x));
  const unsigned threads = blockDim.x;
  const unsigned t = threadIdx.x;
  constexpr unsigned parts = kParts;
  constexpr unsigned span = kLanes / kParts;  // lanes of a part
  const unsigned part = blockIdx.x % parts;
  const unsigned group = blockIdx.x / parts;
  const unsigned groups = gridDim.x / parts;
  const unsigned lane = part * span + t % span;
  const unsigned chunk = lane + kLanes * (t / span);
  const unsigned chunks = static_cast<unsigned>(fp.hidden / kRmsNormChunkElems);
  const unsigned per_row = chunks / parts;  // this block's atoms of a row
  const unsigned rows = (static_cast<unsigned>(fp.tokens) - group + groups - 1) / groups;
  const bool active = chunk < chunks;
  // Row i of the group is token row group + i * groups; this thread's chunk of it.
  const size_t row_step = static_cast<size_t>(groups) * fp.hidden * 2;
  const size_t first = group * fp.hidden * 2 + static_cast<size_t>(chunk) * 16;

  // Loads that do not depend on the phase, in flight across the barrier.
  Vec16 in{}, res{}, weight{};
  if (active) {
    in = platform::LoadInput16(p.in + first);
    if (fp.residual != nullptr) res = platform::LoadInput16(fp.residual + first);
    weight = platform::LoadInput16(fp.weight + static_cast<size_t>(chunk) * 16);
  }

  __shared__ uint32_t gave_up;
  __shared__ unsigned char parity[kFusedMaxAreas];
  __shared__ float lanes[kLanes];
  __shared__ float row_inv;
  __shared__ uint32_t row_ok;
  extern __shared__ float squares[];  // [8][helpers]
  const unsigned helpers = threads - span;
  if (t == 0) gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
  // Each area this block uses: its count picks the phase of its rows, and
  // advances (nothing else in this grid touches the area's count).
  const unsigned used_areas =
      map.Row(static_cast<int>((rows * per_row - 1) / kFusedSlotRowAtoms)).area_index + 1;
  for (unsigned m = t; m < used_areas; m += threads) {
    uint32_t* count = p.oneshot_counter + blockIdx.x + m * gridDim.x;
    const uint32_t c = *count;
    *count = c + 1;
    parity[m] = static_cast<unsigned char>(c & 1u);
  }
  __syncthreads();
  if (gave_up != kGpuErrorNone) return;

  // Offset of row i's atom of this thread in a source's part of the region,
  // phase included.
  auto slot = [&](unsigned i) -> size_t {
    const unsigned j = i * per_row + t;
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
  // Token row r's inbox of part q: 256 words at lane_words + (r * P + q) * 256.
  uint32_t* const lane_words = reinterpret_cast<uint32_t*>(p.buffers[p.rank] + fp.lanes);
  const float hidden = static_cast<float>(fp.hidden);  // round to nearest, as the host
  bool ok = true;
  for (unsigned i = 0; i < rows; ++i) {
    const size_t off = first + i * row_step;
    const size_t token = group + static_cast<size_t>(i) * groups;
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
    // The lane's sum: its chunks lane, lane + 256, ... in order, each
    // chunk's squares in order (a thread past the row, or whose wait gave
    // up, adds 0).
    float sq[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sq[e] = platform::MulRn(x[e], x[e]);
    if (helpers > 0) {
      if (t >= span) {
#pragma unroll
        for (int e = 0; e < 8; ++e) squares[e * helpers + t - span] = sq[e];
      }
      __syncthreads();
    }
    if (t < span) {
      float sum = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) sum = platform::AddRn(sum, sq[e]);
      for (unsigned u = t; u < helpers; u += span) {
#pragma unroll
        for (int e = 0; e < 8; ++e) sum = platform::AddRn(sum, squares[e * helpers + u]);
      }
      lanes[lane] = sum;
#pragma unroll
      for (unsigned q = 0; q < parts; ++q) {
        if (q != part) {
          platform::StoreRemote32(lane_words + (token * parts + q) * kLanes + lane,
                                  LaneToWire(sum));
        }
      }
    }
    __syncthreads();
    if (t < kWarp) {
      // This part's lane sums from shared memory, the other parts' from the
      // inbox: every load issued before any wait.
      uint32_t* const inbox = lane_words + (token * parts + part) * kLanes;
      const unsigned i0 = t % kWarp;
      uint32_t raw[kTreePer];  // a lane sum's bits, or its inbox word's first load
#pragma unroll
      for (int k = 0; k < kTreePer; ++k) {
        const unsigned j = i0 + k * kWarp;
        raw[k] = j / span == part ? __float_as_uint(lanes[j]) : platform::LoadShared32(inbox + j);
      }
      bool got = true;
      float v[kTreePer];
#pragma unroll
      for (int k = 0; k < kTreePer; ++k) {
        const unsigned j = i0 + k * kWarp;
        v[k] = 0.0f;
        if (j / span == part) {
          v[k] = __uint_as_float(raw[k]);
        } else if (got) {
          got = ReceiveLane(inbox + j, raw[k], v[k], p);
        }
      }
      const float root = LaneTree(v);
      got = platform::WarpAll(got);
      if (t == 0) {
        const float mean = platform::DivRn(root, hidden);
        row_inv = platform::DivRn(1.0f, platform::SqrtRn(platform::AddRn(mean, fp.eps)));
        row_ok = got ? 1u : 0u;
      }
    }
    // The tree has read the lanes and the inverse is written: the next row
    // may write the lanes and squares again.
    __syncthreads();
    const float inv = row_inv;
    if (row_ok == 0) ok = false;
    if (active && ok) {
      float w[8];
      Unpack<kBf16>(weight, w);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = platform::MulRn(platform::MulRn(x[e], inv), w[e]);
      platform::StoreOutput16(p.out + off, Pack<kBf16>(x));
    }
  }
}

template <WorkFormat kElem, int kWs>
FusedKernelFn ForParts(int parts) {
  switch (parts) {
    case 1:
      return FusedOneShotKernel<kElem, kWs, 1>;
    case 2:
      return FusedOneShotKernel<kElem, kWs, 2>;
    case 4:
      return FusedOneShotKernel<kElem, kWs, 4>;
    case 8:
      return FusedOneShotKernel<kElem, kWs, 8>;
  }
  return nullptr;
}

template <WorkFormat kElem>
FusedKernelFn ForWs(int ws, int parts) {
  switch (ws) {
    case 2:
      return ForParts<kElem, 2>(parts);
    case 4:
      return ForParts<kElem, 4>(parts);
    case 8:
      return ForParts<kElem, 8>(parts);
  }
  return nullptr;
}

}  // namespace

size_t FusedSquaresBytes(int threads, int parts) {
  const int helpers = threads - kLanes / parts;
  return helpers > 0 ? static_cast<size_t>(helpers) * kRmsNormChunkElems * 4 : 0;
}

FusedKernelFn FusedOneShotKernelFor(WorkFormat elem, int ws, int parts) {
  switch (elem) {
    case WorkFormat::kFp16:
      return ForWs<WorkFormat::kFp16>(ws, parts);
    case WorkFormat::kBf16:
    case WorkFormat::kBf16Cast:
      return ForWs<WorkFormat::kBf16>(ws, parts);
  }
  return nullptr;
}

}  // namespace qr::kernels::gpu
