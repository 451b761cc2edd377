// The data-flag family of the two-shot all-reduce (INT4, INT8 with
// `--define qr_two_shot_sync=data_flag`; two_shot.h says what it is and why
// it is not the default): its kernel, picked by two_shot.cu.
#ifndef QR_KERNELS_GPU_TWO_SHOT_DATA_FLAG_CUH_
#define QR_KERNELS_GPU_TWO_SHOT_DATA_FLAG_CUH_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_call.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/gpu/two_shot_phases.cuh"

namespace qr::kernels::gpu {

// The data-flag family (INT4, INT8; two_shot.h): every warp runs the tile
// loop on its own, with no block barrier after the call's start.
//
// Memory model (PTX's; HIP's system-scope atomics on AMD are the same
// argument). Let X be one 32-bit element of a slot (16-bit for a 2-byte
// scale piece at world size 8) in my buffer, written for tile colour c by
// lane l of warp w of the same block on peer s, and read by lane l' of my
// warp w (l' = l for code words; the 4 lanes of l's scale block for scale
// words).
//  * Every access to X is a relaxed system-scope access of X's width at X's
//    address (kernels/platform/relaxed.cuh): the sender's store, my polls,
//    my clear. They are morally strong, so none is a data race, and each
//    is single-copy atomic: a poll returns some whole value in X's
//    coherence order.
//  * X's coherence order is ... clear(c - R), write(c), clear(c), write(c +
//    R) ...: my clear(c - R) happens before the sender's write(c) (below),
//    and my clear(c) follows my own reads of write(c) (program order, or
//    for scale words the __syncwarp after every lane's last poll).
//  * So a poll of tile c, which comes after my clear(c - R) (program order;
//    the __syncwarp for scale words), returns clear(c - R) = 0 or write(c):
//    not write(c + R), whose sender first needs my credit for c, which I
//    give after clear(c). The sender's words are never 0 (code words, all of
//    whose codes are >= 1) or have bit 15 set (scale halves, which a clear
//    never has; kernels:wire_flag_premise_test), so "non-zero / flagged"
//    means "write(c)", and the warp's data is complete when every lane's
//    words are. Nothing but these words is read, so no fence or acquire is
//    needed on the receive path.
//  * clear(c) happens before write(c + R): every lane clears, __syncwarp
//    (orders the warp's clears before lane 0's next instructions at block
//    scope), lane 0 fence.acq_rel.sys (cumulative: releases what the warp
//    did before), then a relaxed store of the credit c into the sender's
//    buffer; the sender's lane acquires a credit >= c, __syncwarp, and only
//    then does any lane of its warp store tile c + R.
// Per warp the loop is: phase 1 of tile c out (after its credit wait), poll
// phase 1 of c from every peer, clear it, credit c - 1 (its phase 2 was
// cleared at the end of the last iteration; the fence then finds this
// warp's earlier peer stores long acknowledged, and the peer needs the
// credit only at tile c - 1 + R), reduce, phase 2 of c out, phase 1 of c + 1
// out (its credit wait: c + 1 - R <= c - 2, released a tile ago), poll phase
// 2 of c from every peer, decode it to the output and clear it. The last
// tile's credit goes out with the next call's first tile, or is superseded
// by that call's handshake.
//
// Bounded waits: a warp polls; every 64 polls lane 0 alone runs
// ShouldGiveUp (the abort word, dev_error, the timeout) and the warp
// returns if it says so; the block's other warps see dev_error at their
// next wait. The timing variants skip the polls' waiting (one load) and the
// credit waits (no_waits) or the fences (no_fences).

template <int kWs>
struct WarpCredits {
  uint32_t seen;  // lane r < kWs: the last credit acquired from rank r

  // Before this warp writes tile colour `target` + R into any peer's ring.
  QR_DEVICE_INLINE bool Wait(const KernelParams& p, int warp, int lane, uint32_t target) {
    if (kVariantSkipsWaits) return true;
    const bool mine = lane < kWs && lane != p.rank;
    bool ok = !mine || CreditReached(seen, target);
    if (platform::WarpAll(ok)) return true;
    const uint32_t* word = CreditWord(p, p.rank, warp, mine ? lane : 0);
    uint64_t start = 0;
    if (lane == 0) start = platform::WallClock();
    for (uint32_t spins = 1;; ++spins) {
      if (!ok && CreditReached(platform::AtomicLoadRelaxedSystem(word), target)) {
        seen = platform::AtomicLoadAcquireSystem(word);
        ok = true;
      }
      if (platform::WarpAll(ok)) break;
      if ((spins & 63u) == 0 && platform::WarpAny(lane == 0 && ShouldGiveUp(start, p))) {
        return false;
      }
      platform::PollPause();
    }
    // The acquiring lanes' order, for every lane's stores that follow.
    platform::WarpSync();
    return true;
  }

  // After this warp cleared both phases of tile `colour` in my buffer.
  QR_DEVICE_INLINE static void Release(const KernelParams& p, int warp, int lane, uint32_t colour) {
    platform::WarpSync();
    if (lane == 0) {
      if (!kVariantSkipsFences) platform::FenceSystem();
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) platform::AtomicStoreRelaxedSystem(CreditWord(p, r, warp, p.rank), colour);
      }
    }
  }
};

// This lane's words of the shard at src into w once every lane of the warp
// has all of its own; false when the wait gave up.
template <class L>
QR_DEVICE_INLINE bool WarpPoll(const KernelParams& p, const char* src, typename L::Words& w) {
  bool done = L::PollLoad(src, threadIdx.x, w);
  if (kVariantSkipsWaits || platform::WarpAll(done)) return true;
  const bool lane0 = threadIdx.x % platform::kWarpSize == 0;
  uint64_t start = 0;
  if (lane0) start = platform::WallClock();
  for (uint32_t spins = 1;; ++spins) {
    if ((spins & 63u) == 0 && platform::WarpAny(lane0 && ShouldGiveUp(start, p))) return false;
    platform::PollPause();
    if (!done) done = L::PollLoad(src, threadIdx.x, w);
    if (platform::WarpAll(done)) return true;
  }
}

template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
__global__ void __launch_bounds__(
    kTwoShotThreads, (CodecT<Elem<kElem>::kMathBf16, kTwoShotAtoms / kWs>::kMinBlocksPerSm))
    TwoShotDataFlagKernel(KernelParams p) {
  constexpr int kA = kTwoShotAtoms / kWs;
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  using C = CodecT<kBf16, kA>;
  using Wire = typename C::Wire;
  // The data-flag accesses of the wire layout (kernels/gpu/int_wire.cuh).
  using L = typename C::L;
  static_assert(std::is_same_v<Wire, typename L::Words>);
  static_assert(UsesDataFlags(kCodec) && L::kDataIsFlag && !C::kPrefetchInput);
  constexpr uint32_t kRing = kDataFlagRingRows;
  constexpr size_t kRowBytes = static_cast<size_t>(DataFlagRowBytes(kCodec, kWs));
  static_assert(kRing >= 3 && (kRing & (kRing - 1)) == 0, "two_shot.h's ring");
  static_assert(C::kShardWireBytes * (kWs - 1) == kRowBytes && DataFlagRingFits(kCodec, kWs));

  uint32_t base;
  if (!BeginTwoShotCall<kCodec, kWs>(p, base)) return;

  const int tid = threadIdx.x;
  const int warp = tid / platform::kWarpSize;
  const int lane = tid % platform::kWarpSize;
  // Shard slot of source `src` in rank `holder`'s ring, phase at `phase`.
  auto shard = [&](int holder, size_t phase, uint32_t colour, int src) {
    return p.buffers[holder] + phase + blockIdx.x * kTwoShotBlockPhaseBytes +
           (colour % kRing) * kRowBytes + DataFlagSourceSlot(src, holder) * C::kShardWireBytes;
  };

  WarpCredits<kWs> credits{base - kRing};  // forces a load at the first wait
  // Phase 1 of `tile`: shard r to rank r (source: my rank), mine into `own`.
  auto phase1 = [&](int tile, uint32_t colour, Wire& own) {
    if (!credits.Wait(p, warp, lane, colour - kRing)) return false;
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      Vec16 in[kA];
#pragma unroll
      for (int k = 0; k < kA; ++k) in[k] = LoadInputAtom<MessageTiles<kWs>>(p, tile, r, k);
      const Wire w = C::template EncodeInput<kElem>(in, tid);
      if (r == 0 || r == p.rank) own = w;
      if (r != p.rank) L::StoreFlagged(w, shard(r, p.data1, colour, p.rank), tid);
    }
    return true;
  };

  uint32_t colour = base + 1;
  int tile = blockIdx.x;
  Wire own1;
  if (!phase1(tile, colour, own1)) return;
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    // No exit inside the unrolled loops (a loop with two exits stays rolled,
    // and src[] would go to local memory): a wait that gave up skips the
    // rest and the warp returns after the loop.
    // src[s] is stored once per s, unconditionally: written only in an
    // `s == p.rank` branch, the compiler indexes it by p.rank (equal there)
    // and src[] goes to local memory (56-96 bytes of stack at ws 2 and 4).
    Wire src[kWs];
    bool ok = true;
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      Wire w = own1;
      if (s != p.rank && ok) ok = WarpPoll<L>(p, shard(p.rank, p.data1, c, s), w);
      src[s] = w;
    }
    if (!ok) return;
    platform::WarpSync();
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      if (s != p.rank) L::ClearRead(shard(p.rank, p.data1, c, s), tid);
    }
    WarpCredits<kWs>::Release(p, warp, lane, c - 1);

    Vec16 reduced[kA];
    C::Reduce(src, reduced);
    {
      const Wire w2 = C::Encode(reduced, tid);
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) L::StoreFlagged(w2, shard(r, p.data2, c, p.rank), tid);
      }
      StoreOutputShard<kElem, C, MessageTiles<kWs>>(p, tile, p.rank, w2);
    }
    if (tile + static_cast<int>(gridDim.x) < p.num_tiles &&
        !phase1(tile + gridDim.x, ++colour, own1)) {
      return;
    }

#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      if (s == p.rank || !ok) continue;
      Wire w;
      ok = WarpPoll<L>(p, shard(p.rank, p.data2, c, s), w);
      if (ok) {
        platform::WarpSync();
        L::ClearRead(shard(p.rank, p.data2, c, s), tid);
        StoreOutputShard<kElem, C, MessageTiles<kWs>>(p, tile, s, w);
      }
    }
    if (!ok) return;
  }
  if (tid == 0) p.colours[blockIdx.x] = colour;
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_TWO_SHOT_DATA_FLAG_CUH_
