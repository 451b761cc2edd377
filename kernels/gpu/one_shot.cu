// The one-shot all-reduce kernel (kernels/one_shot_reference.h is the spec).
//
// Rows of kOneShotThreads 16-byte atoms belong to blocks by a fixed stride
// S = p.oneshot_blocks (OneShotStrideBlocks: the same for every call of a
// rank and on every rank): block b owns rows b, b + S, b + 2S, ..., and
// thread t of it atom t of each. A call launches the blocks that own at
// least one of its rows (OneShotGrid: min(S, rows)). Each thread pushes its
// atoms' wire form (NOT of the work-dtype bits, never zero) into every
// peer's region [phase][source = me], then, atom by atom, polls its own
// region until each peer's atom is non-zero in every 16-bit lane, zeroes it
// again, and sums the ws values in rank order. The data is its own flag: no
// fence, no release/acquire round trip, one hop.
//
// Phases: block b counts its own calls in device memory
// (p.oneshot_counter[b]), and the count's parity picks the phase of b's
// rows. Block b runs in exactly the calls that reach row b, and every rank
// issues the same calls with the same grids, so block b's count is the same
// on every rank in every call: writer and reader of a row agree on its
// phase. Thread 0 reads the count and stores count + 1 at once: nothing else
// in this kernel reads the word (the block uses the shared copy), and the
// next kernel on the stream starts after this one ended (graph replays
// too; launched with programmatic overlap, it waits for that end before its
// first read, platform::WaitForPriorKernels). No end-of-kernel atomic, no
// last block (BeginOneShotBlock, one_shot_device.cuh). A kernel that gives
// up sets the rank's sticky error word, and every later call returns before
// it reads a count, so a count advanced by a failed call is never used.
//
// The one-shot reduce-scatter and all-gather (one_shot_collectives.cu) lay
// their wire over the same rows with the same blocks and counts, and in
// each of their runs of block b every rank also receives at least one atom
// of row b from every peer, so the argument below covers any sequence of
// them, of this kernel and of the fused one (one_shot_fused_slots.h).
//
// Why zeroing right after reading is safe with two phases. Take row R of
// block b and b's n-th run, which reads phase n & 1. Peer q wrote our slot
// (n & 1, q, R) in its own run n of block b and writes it next in its run
// n + 2. That run is in a kernel that starts after peer q's kernel of run
// n + 1 ended, and there block b ended only after it received our block b's
// atoms of run n + 1 (every run of b has row b, so thread 0 at least waits
// for one). Our block b sent those from a kernel after the one of run n, so
// after our clears of run n were done: the peer's next write to a slot comes
// after our clear of it, and our run n + 2 waits for that write. This is why
// the stride is fixed: with a per-call stride a row would move between
// blocks, and the counts of the blocks that read and write it would not be
// in step. Only same-index blocks depend on each other, as in the two-shot
// kernel, so no block waits for a block of its own grid; the grid is at most
// the layout's blocks, resident at once as the two-shot grids are.
#include <hip/hip_runtime.h>

#include "kernels/gpu/one_shot_device.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/launch.cuh"

namespace qr::kernels::gpu {
namespace {

template <WorkFormat kElem, int kWs>
__global__ void __launch_bounds__(kOneShotThreads) OneShotKernel(KernelParams p) {
  // Before anything the previous kernel may touch (programmatic launch,
  // kernels/platform/launch.cuh): the counts, the slots, the input.
  platform::WaitForPriorKernels();
  constexpr size_t kPerSource = OneShotMaxBytes(kWs);
  const size_t atoms = p.bytes / 16;
  const size_t first = static_cast<size_t>(blockIdx.x) * kOneShotThreads + threadIdx.x;
  const size_t stride = static_cast<size_t>(p.oneshot_blocks) * kOneShotThreads;
  // The first input atom does not depend on the phase: its load is in flight
  // while thread 0 reads the count and the block meets at the barrier.
  Vec16 first_in{};
  if (first < atoms) first_in = platform::LoadInput16(p.in + first * 16);
  size_t phase;
  if (!BeginOneShotBlock(p, phase)) return;
  const size_t my_slot = p.oneshot + phase + p.rank * kPerSource;

  for (size_t a = first; a < atoms; a += stride) {
    const Vec16 in = a == first ? first_in : platform::LoadInput16(p.in + a * 16);
    const Vec16 w = ToWire(Elem<kElem>::In(in));
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      if (r != p.rank) platform::StoreRemote16(p.buffers[r] + my_slot + a * 16, w);
    }
  }

  char* const mine = p.buffers[p.rank] + p.oneshot + phase;
  bool ok = OneShotGate<kWs>(p, mine, atoms, stride);
  for (size_t a = first; a < atoms && ok; a += stride) {
    // Our own values, loaded before the polls so that the load overlaps them.
    const Vec16 own = a == first ? first_in : platform::LoadInput16(p.in + a * 16);
    Vec16 sum;
    ok = ReceiveSum<kElem, kWs>(p, mine, a * 16, own, sum);
    if (ok) platform::StoreOutput16(p.out + a * 16, sum);
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

int OneShotStrideBlocks(int max_blocks, int world_size) {
  const int64_t rows = OneShotMaxBytes(world_size) / (int64_t{kOneShotThreads} * 16);
  return static_cast<int>(rows < max_blocks ? rows : max_blocks);
}

int OneShotGrid(size_t bytes, int max_blocks, int world_size) {
  const size_t per_row = static_cast<size_t>(kOneShotThreads) * 16;
  const size_t rows = (bytes + per_row - 1) / per_row;
  const size_t stride = static_cast<size_t>(OneShotStrideBlocks(max_blocks, world_size));
  return static_cast<int>(rows < stride ? rows : stride);
}

}  // namespace qr::kernels::gpu
