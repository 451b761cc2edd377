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
// helpers u + 256 / P, ... through shared memory). In the lane-threads form
// (one part, two chunks a thread: kChunksPerThread = 2) a block takes whole
// rows of up to 8192 values with no exchange between blocks. The tree needs
// every lane. Where the platform has thread block clusters (NVIDIA,
// platform/cluster.cuh), a row's parts are one cluster: each part stores
// its lane sums into every part's shared memory, a cluster barrier, and
// every warp runs the reference's pairwise tree and the inverse. Elsewhere
// each part stores them into every other part's inbox (its own rank's
// buffer, TwoShotLayout::fused_lanes, one inbox per token row and part, so
// none is reused within a call), and warp 0 of each part reads them
// (polling, zeroing after the read, like the one-shot slots) and runs the
// tree. So a row of 8192 values runs
// on 4 multiprocessors instead of one (with one token row, one block's
// multiprocessor issuing all of a row's instructions was most of the
// kernel's time). Every part is in the same grid, resident at once
// (FusedMaxGrid), and waits only for its own row's parts and for the
// same-index block of each peer, as in the plain kernel.
#include <hip/hip_runtime.h>

#include "kernels/gpu/fp8_output.cuh"
#include "kernels/gpu/fused_lanes.cuh"
#include "kernels/gpu/one_shot_device.cuh"
#include "kernels/gpu/one_shot_fused.cuh"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/rmsnorm_inverse.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/cluster.cuh"
#include "kernels/platform/launch.cuh"
#include "kernels/rmsnorm_lanes.h"

namespace qr::kernels::gpu {
namespace {

constexpr int kLanes = kRmsNormLanes;
constexpr int kWarp = platform::kWarpSize;
static_assert(kFusedMaxThreads % kLanes == 0, "thread t is lane t % 256 of the sum of squares");
static_assert(kFusedSlotRowAtoms == kOneShotThreads, "a slot row is the one-shot kernel's row");
static_assert(kFusedMaxParts <= platform::kMaxPortableCluster, "a row's parts are one cluster");

// The ranks whose atoms a thread loads together in its receive
// (ReceiveSumWire's kGroup), under the 64-register bound below. Measured on
// one H200 (ranks sharing it, and rank 0 alone; docs/performance.md "Peers'
// loads in groups"): at world size 4 all four at once (ptxas: no spills in
// bf16, 4-20 bytes in fp16) took 0.2-0.8 us off every cell against one at a
// time; at 8 the one-chunk form is 0.15-0.25 us faster in groups of four
// (4-44 bytes of spills, 36-60 in the parts kernels since ReceiveLanes)
// than all at once (20-64), while the lane-threads
// form, whose two chunks each wait, gains most from all at once (1 us at
// 1-16 x 4096, though it spills 80-164 bytes). World size 2 has one peer.
constexpr int FusedPeerGroup(int ws, int chunks_per_thread) {
  if (ws == 8) return chunks_per_thread == 1 ? 4 : 8;
  return ws == 4 ? 4 : 1;
}

// At most 64 registers a thread: a multiprocessor holds 1024 / blockDim.x
// blocks, the budget FusedMaxGrid sizes the grid for. Dynamic shared memory:
// the squares of the part's helper threads (FusedSharedBytes). Divisions
// of the slot map are done once a block, a row's slot once a row, the wire
// form once, and the tree, the division and the square root run on one
// warp, or on every warp at once where a row is one part (the first form's
// warps issued about 1000 instructions each, a third of them integer
// divisions).
//
// kChunksPerThread = 2 is the lane-threads form (one_shot_fused_slots.h
// FusedLaneThreads): one part; thread u (lane l = u % 256, m = u / 256)
// takes chunks l + 256 (2m) and l + 256 (2m + 1) of each row, so a row of
// 4096 values runs on 256 threads without helpers and one of 8192 on 512.
// With one part a row's chunk c is the block's local atom i * hidden / 8 +
// c of row i in both forms, so they lay a call out alike.
template <WorkFormat kElem, int kWs, int kParts, int kChunksPerThread>
__global__ void __launch_bounds__(kFusedMaxThreads, 1) FusedOneShotKernel(FusedOneShotParams fp) {
  static_assert(kChunksPerThread == 1 || kParts == 1,
                "several chunks a thread: whole rows, one part");
  static_assert(kChunksPerThread == 1 || kChunksPerThread == kFusedLaneChunks,
                "the forms' chunks a thread");
  // Before anything the previous kernel may touch (the counts, the slots).
  platform::WaitForPriorKernels();
  const KernelParams& p = fp.base;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  constexpr size_t kChunksPerThreadSource = OneShotMaxBytes(kWs);
  // With one chunk a thread the residual and the weight are loaded with the
  // input and kept in registers. With several (64 registers a thread would
  // spill), the residual's loads are issued after the push (the peers'
  // atoms are still on their way) and the weight goes to shared memory
  // after the push, so that only residual_out's bits stay in registers
  // across the tree.
  constexpr bool kOneChunk = kChunksPerThread == 1;
  constexpr int kGroup = FusedPeerGroup(kWs, kChunksPerThread);
  // A row's parts run as one cluster where the platform has them, and
  // store their lane sums into each other's shared memory; elsewhere into
  // each part's inbox in this rank's buffer, which warp 0 polls.
  constexpr bool kCluster = platform::kBlockClusters && kParts > 1;
  const FusedSlots slots{fp.slot_rows, p.oneshot_blocks, static_cast<int>(gridDim.x), kParts};
  const FusedBlockMap map(slots, fp.consts, static_cast<int>(blockIdx.x));
  const unsigned threads = blockDim.x;
  const unsigned t = threadIdx.x;
  constexpr unsigned parts = kParts;
  constexpr unsigned span = kLanes / kParts;  // lanes of a part
  const unsigned part = blockIdx.x % parts;
  const unsigned group = blockIdx.x / parts;
  const unsigned groups = gridDim.x / parts;
  const unsigned lane = part * span + t % span;
  // Chunk k of this thread: chunk0 + 256 k.
  const unsigned chunk0 = lane + kLanes * (t / span) * kChunksPerThread;
  const unsigned chunks = static_cast<unsigned>(fp.hidden / kRmsNormChunkElems);
  const unsigned per_row = chunks / parts;  // this block's atoms of a row
  const auto rows = static_cast<unsigned>(FusedGroupTokens(fp.consts, static_cast<int>(group)));
  auto active = [&](int k) { return chunk0 + kLanes * k < chunks; };
  // Row i of the group is token row group + i * groups; this thread's chunk
  // k of it is at first + i * row_step + k * kChunkStep.
  const size_t row_step = static_cast<size_t>(groups) * fp.hidden * 2;
  const size_t first = group * fp.hidden * 2 + static_cast<size_t>(chunk0) * 16;
  constexpr size_t kChunkStep = kLanes * 16;

  // Loads that do not depend on the phase, in flight across the barrier.
  Vec16 in[kChunksPerThread], res[kChunksPerThread], weight[kChunksPerThread];
#pragma unroll
  for (int k = 0; k < kChunksPerThread; ++k) {
    in[k] = res[k] = weight[k] = Vec16{};
    if (!active(k)) continue;
    in[k] = platform::LoadInput16(p.in + first + k * kChunkStep);
    if (kOneChunk && fp.residual != nullptr) {
      res[k] = platform::LoadInput16(fp.residual + first + k * kChunkStep);
    }
    weight[k] =
        platform::LoadInput16(fp.weight + static_cast<size_t>(chunk0) * 16 + k * kChunkStep);
  }

  __shared__ uint32_t gave_up;
  __shared__ unsigned char parity[kFusedMaxAreas];
  // With one part a row, or a cluster's, every warp runs the tree and the
  // inverse itself (no inbox to poll): no barrier after them, 0.03-0.2 us
  // less than warp 0 alone with the others waiting (one H200,
  // docs/performance.md). The lane sums then take two buffers by row
  // parity, since no barrier keeps row i + 1 from writing what a slower
  // warp (of any block of the cluster) still reads of row i; row i + 2
  // writes only after every thread arrived at row i + 1's barrier.
  constexpr bool kTreeEveryWarp = kParts == 1 || kCluster;
  constexpr int kLaneBuffers = kTreeEveryWarp ? 2 : 1;
  __shared__ float lane_sums[kLaneBuffers * kLanes];
  __shared__ float row_inv;
  __shared__ uint32_t row_ok;
  // Dynamic (FusedSharedBytes): the helpers' squares [8 kChunksPerThread][helpers], then
  // with several chunks a thread the weight, chunk by chunk.
  extern __shared__ float dynamic_shared[];
  const unsigned helpers = threads - span;
  float* const squares = dynamic_shared;
  Vec16* const weight_shared =
      reinterpret_cast<Vec16*>(dynamic_shared + helpers * 8 * kChunksPerThread);
  // The sticky error word and the counts are read together: storing the
  // word to shared memory before the counts' loop made it two round trips.
  uint32_t error = kGpuErrorNone;
  if (t == 0) error = platform::AtomicLoadRelaxedSystem(p.dev_error);
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
  if (t == 0) gave_up = error;
  // A cluster's blocks exchange through each other's shared memory: each
  // says it runs before any stores into it (the wait is after the push).
  if (kCluster) platform::ClusterArriveRelaxed();
  __syncthreads();
  // A block of a cluster never returns alone (its peers would wait for it
  // at every row's cluster barrier): it goes through its rows without
  // pushing or receiving.
  const bool live = gave_up == kGpuErrorNone;
  if (!kCluster && !live) return;

  // Offset of chunk k of row i of this thread in a source's part of the
  // region, phase included (below 2^32: two phases of at most 2^28 bytes).
  auto slot = [&](unsigned i, int k) -> uint32_t {
    const unsigned j = i * per_row + (kParts == 1 ? chunk0 + kLanes * k : t);
    const FusedSlotRow r = map.Row(static_cast<int>(j / kFusedSlotRowAtoms));
    return parity[r.area_index] * static_cast<uint32_t>(kOneShotRegionBytes) +
           (static_cast<uint32_t>(r.row) * kFusedSlotRowAtoms + j % kFusedSlotRowAtoms) * 16;
  };
  static_assert(2 * static_cast<uint64_t>(kOneShotRegionBytes) <= (uint64_t{1} << 32),
                "slot offsets fit 32 bits");
  uint32_t slot0[kChunksPerThread];
#pragma unroll
  for (int k = 0; k < kChunksPerThread; ++k) slot0[k] = slot(0, k);

  // Push every row; row 0's wire form stays in `in` for its receive.
  for (unsigned i = 0; live && i < rows; ++i) {
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      if (!active(k)) continue;
      const Vec16 w = ToWire(Elem<kElem>::In(
          i == 0 ? in[k] : platform::LoadInput16(p.in + first + i * row_step + k * kChunkStep)));
      if (i == 0) in[k] = w;
      const size_t to =
          p.oneshot + (i == 0 ? slot0[k] : slot(i, k)) + p.rank * kChunksPerThreadSource;
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) platform::StoreRemote16(p.buffers[r] + to, w);
      }
    }
  }

  // The FP8 output's 1 / scale for every row, loaded after the push (whose
  // start matters) while the peers' atoms are on their way; every row has a
  // block (or cluster) barrier before its norm.
  __shared__ float fp8_inv_scale;
  if (fp.quant_out != nullptr && t == threads - 1) {
    fp8_inv_scale = Fp8InverseScaleOf(fp.quant_scale);
  }

  if (!kOneChunk) {
    // Each thread reads back only its own chunks' weight: no barrier.
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      if (active(k)) weight_shared[chunk0 + kLanes * k] = weight[k];
    }
  }

  char* const mine = p.buffers[p.rank] + p.oneshot;
  // Token row r's inbox of part q: 256 words at lane_words + (r * P + q) * 256.
  uint32_t* const lane_words = reinterpret_cast<uint32_t*>(p.buffers[p.rank] + fp.lanes);
  if (kCluster) platform::ClusterWait();
  bool ok = live;
  for (unsigned i = 0; i < rows; ++i) {
    const size_t off = first + i * row_step;
    const size_t token = group + static_cast<size_t>(i) * groups;
    float* const lanes = lane_sums + (kLaneBuffers == 2 ? (i & 1u) * kLanes : 0);
    // This row's input (as wire; row 0's is kept from the push) and
    // residual, every load first.
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      if (!active(k)) continue;
      if (i > 0) {
        in[k] = ToWire(Elem<kElem>::In(platform::LoadInput16(p.in + off + k * kChunkStep)));
      }
      if ((i > 0 || !kOneChunk) && fp.residual != nullptr) {
        res[k] = platform::LoadInput16(fp.residual + off + k * kChunkStep);
      }
    }
    // residual_out's bits (0 past the row or after a failed wait).
    Vec16 out[kChunksPerThread];
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      out[k] = Vec16{};
      if (!active(k) || !ok) continue;
      // The one-shot all-reduce, bit for bit (one_shot.cu), the
      // atoms of kGroup ranks at a time.
      Vec16 sum;
      ok = ReceiveSumWire<kElem, kWs, kGroup>(p, mine, i == 0 ? slot0[k] : slot(i, k), in[k], sum);
      if (!ok) continue;
      // The epilogue (rmsnorm_epilogue.cu), from the reduced bits.
      if (fp.residual != nullptr) {
        float a[8], b[8];
        Unpack<kBf16>(sum, a);
        Unpack<kBf16>(res[k], b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] = platform::AddRn(a[e], b[e]);
        sum = Pack<kBf16>(a);
      }
      platform::StoreOutput16(fp.residual_out + off + k * kChunkStep, sum);
      out[k] = sum;
    }
    // The lane's sum: its chunks lane, lane + 256, ... in order, each
    // chunk's squares in order (a chunk past the row, or after a failed
    // wait, adds 0): an owner (t < span) adds its chunks' squares, then
    // each helper's (t + span, t + 2 span, ...) through shared memory.
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      float x[8];
      Unpack<kBf16>(out[k], x);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float sq = platform::MulRn(x[e], x[e]);
        if (t >= span) {
          squares[(k * 8 + e) * helpers + t - span] = sq;
        } else {
          sum = platform::AddRn(sum, sq);
        }
      }
    }
    if (helpers > 0) __syncthreads();
    if (t < span) {
      for (unsigned u = t; u < helpers; u += span) {
#pragma unroll
        for (int e = 0; e < 8 * kChunksPerThread; ++e)
          sum = platform::AddRn(sum, squares[e * helpers + u]);
      }
      lanes[lane] = sum;
#pragma unroll
      for (unsigned q = 0; q < parts; ++q) {
        if (q == part) continue;
        if (kCluster) {
          platform::StoreClusterShared32(lanes + lane, q, __float_as_uint(sum));
        } else {
          platform::StoreRemote32(lane_words + (token * parts + q) * kLanes + lane,
                                  LaneToWire(sum));
        }
      }
    }
    if (kCluster) {
      platform::ClusterArrive();
      platform::ClusterWait();
    } else {
      __syncthreads();
    }
    float inv;
    if (kTreeEveryWarp) {
      // LaneTree leaves the root in lane 0.
      const unsigned i0 = t % kWarp;
      float v[kLaneTreePer];
#pragma unroll
      for (int k = 0; k < kLaneTreePer; ++k) v[k] = lanes[i0 + k * kWarp];
      const float root =
          __uint_as_float(platform::ShuffleU32(__float_as_uint(LaneTree(v)), 0, kWarp));
      inv = RmsNormInverseOf(root, fp.hidden, fp.eps);
    } else {
      if (t < kWarp) {
        // This part's lane sums from shared memory, the other parts' from
        // the inbox: every load issued before any wait.
        uint32_t* const inbox = lane_words + (token * parts + part) * kLanes;
        const unsigned i0 = t % kWarp;
        uint32_t raw[kLaneTreePer];  // a lane sum's bits, or its inbox word's first load
        bool theirs[kLaneTreePer];
#pragma unroll
        for (int k = 0; k < kLaneTreePer; ++k) {
          const unsigned j = i0 + k * kWarp;
          theirs[k] = j / span != part;
          raw[k] = theirs[k] ? platform::LoadShared32(inbox + j) : __float_as_uint(lanes[j]);
        }
        bool got = ReceiveLanes(inbox, i0, theirs, raw, p);
        float v[kLaneTreePer];
#pragma unroll
        for (int k = 0; k < kLaneTreePer; ++k) v[k] = __uint_as_float(theirs[k] ? ~raw[k] : raw[k]);
        const float root = LaneTree(v);
        got = platform::WarpAll(got);
        if (t == 0) {
          row_inv = RmsNormInverseOf(root, fp.hidden, fp.eps);
          row_ok = got ? 1u : 0u;
        }
      }
      // The tree has read the lanes and the inverse is written: the next
      // row may write the lanes and squares again.
      __syncthreads();
      inv = row_inv;
      if (row_ok == 0) ok = false;
    }
    if (!ok) continue;
    const float inv_scale = fp.quant_out != nullptr ? fp8_inv_scale : 0.0f;
#pragma unroll
    for (int k = 0; k < kChunksPerThread; ++k) {
      if (!active(k)) continue;
      float x[8], w[8];
      Unpack<kBf16>(out[k], x);
      Unpack<kBf16>(kOneChunk ? weight[k] : weight_shared[chunk0 + kLanes * k], w);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = platform::MulRn(platform::MulRn(x[e], inv), w[e]);
      const Vec16 norm = Pack<kBf16>(x);
      platform::StoreOutput16(p.out + off + k * kChunkStep, norm);
      if (fp.quant_out != nullptr) {
        StoreFp8Chunk<kBf16>(fp.quant_out + (off + k * kChunkStep) / 2, norm, inv_scale);
      }
    }
  }
}

template <WorkFormat kElem, int kWs>
FusedKernelFn ForShape(int parts, int chunks_per_thread) {
  if (chunks_per_thread == kFusedLaneChunks) {
    return parts == 1 ? FusedOneShotKernel<kElem, kWs, 1, kFusedLaneChunks> : nullptr;
  }
  if (chunks_per_thread != 1) return nullptr;
  switch (parts) {
    case 1:
      return FusedOneShotKernel<kElem, kWs, 1, 1>;
    case 2:
      return FusedOneShotKernel<kElem, kWs, 2, 1>;
    case 4:
      return FusedOneShotKernel<kElem, kWs, 4, 1>;
    case 8:
      return FusedOneShotKernel<kElem, kWs, 8, 1>;
  }
  return nullptr;
}

template <WorkFormat kElem>
FusedKernelFn ForWs(int ws, int parts, int chunks_per_thread) {
  switch (ws) {
    case 2:
      return ForShape<kElem, 2>(parts, chunks_per_thread);
    case 4:
      return ForShape<kElem, 4>(parts, chunks_per_thread);
    case 8:
      return ForShape<kElem, 8>(parts, chunks_per_thread);
  }
  return nullptr;
}

}  // namespace

size_t FusedSharedBytes(int threads, int parts, int chunks_per_thread) {
  const auto helpers = static_cast<size_t>(threads - kLanes / parts);
  const auto per = static_cast<size_t>(chunks_per_thread);
  const size_t weight = per > 1 ? static_cast<size_t>(threads) * per * 16 : 0;
  return helpers * kRmsNormChunkElems * per * 4 + weight;
}

FusedKernelFn FusedOneShotKernelFor(WorkFormat elem, int ws, int parts, int chunks_per_thread) {
  switch (elem) {
    case WorkFormat::kFp16:
      return ForWs<WorkFormat::kFp16>(ws, parts, chunks_per_thread);
    case WorkFormat::kBf16:
    case WorkFormat::kBf16Cast:
      return ForWs<WorkFormat::kBf16>(ws, parts, chunks_per_thread);
  }
  return nullptr;
}

}  // namespace qr::kernels::gpu
