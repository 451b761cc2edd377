#include <hip/hip_runtime.h>

#include <type_traits>

#include "kernels/gpu/codecs.cuh"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/launch.cuh"

namespace qr::kernels {
namespace gpu {
namespace {

constexpr size_t kAtomStride = kTwoShotThreads * 16;  // bytes between a thread's atoms
constexpr int kWarps = kTwoShotThreads / platform::kWarpSize;
static_assert(kWarps <= kTwoShotLayoutWarps, "the layout has a credit word per warp");

// This thread's input atom i of `tile`; atoms past the end read as zero
// (sizes are whole atoms).
QR_DEVICE_INLINE Vec16 LoadInputAtom(const KernelParams& p, int tile, int i) {
  const size_t off = static_cast<size_t>(tile) * kTileBytes + threadIdx.x * 16 + i * kAtomStride;
  return off < p.bytes ? platform::LoadInput16(p.in + off) : Vec16{};
}

// Shard s of `tile` into the output, atom by atom (atoms past the end are
// not written).
template <WorkFormat kElem, class C, int kA>
QR_DEVICE_INLINE void StoreOutputShard(const KernelParams& p, int tile, int s,
                                       const typename C::Wire& w) {
  const size_t base = static_cast<size_t>(tile) * kTileBytes + threadIdx.x * 16;
  C::template DecodeOut<kElem>(w, [&](int k, const Vec16& v) {
    const size_t off = base + (s * kA + k) * kAtomStride;
    if (off < p.bytes) platform::StoreOutput16(p.out + off, v);
  });
}

// ---------------------------------------------------------------------------
// Data-flag credits (two_shot.h). Credit word of (this block, `warp`, rank
// `granting`) in the buffer of rank `holder`.
QR_DEVICE_INLINE uint32_t* CreditWord(const KernelParams& p, int holder, int warp, int granting) {
  return reinterpret_cast<uint32_t*>(p.buffers[holder] + p.credits) +
         (static_cast<size_t>(blockIdx.x) * kTwoShotLayoutWarps + warp) * kMaxWorldSize + granting;
}

// Whether credit value v lets a tile wait for `target` go on (colours wrap
// after 2^32 tiles of a block; they compare as a signed difference).
QR_DEVICE_INLINE bool CreditReached(uint32_t v, uint32_t target) {
  return static_cast<int32_t>(v - target) >= 0;
}

// WaitWord (two_shot_device.cuh) until a credit reaches `target`.
QR_DEVICE_INLINE bool WaitCredit(const uint32_t* word, uint32_t target, const KernelParams& p) {
  return WaitWord(
      word, [target](uint32_t v) { return CreditReached(v, target); }, p);
}

// The start of every two-shot call, block-wide: false when this rank has
// given up (now or during the handshake). Else `base` is the colour before
// the call's first tile, after the codec-change handshake of two_shot.h
// where this block's last two-shot call needs one.
template <Codec kCodec, int kWs>
QR_DEVICE_INLINE bool BeginTwoShotCall(const KernelParams& p, uint32_t& base) {
  // Before anything the previous kernel may touch (programmatic launch,
  // kernels/platform/launch.cuh): the state words, the slots, the input.
  platform::WaitForPriorKernels();
  constexpr bool kDataFlag = UsesDataFlags(kCodec);
  constexpr uint32_t kWord = CodecStateWord(kCodec);
  __shared__ uint32_t gave_up, last;
  // A rank that gave up drains every later call at once (sticky error). One
  // thread reads the flag (device memory) for the whole block.
  if (threadIdx.x == 0) {
    gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
    if (kDataFlagBuild) last = p.codec_state[blockIdx.x];
  }
  __syncthreads();
  if (gave_up != kGpuErrorNone) return false;
  base = p.colours[blockIdx.x];
  // Without data-flag kernels every codec is of the flag family: no call
  // needs the handshake, and nothing reads the state word.
  if constexpr (!kDataFlagBuild) return true;
  const uint32_t prev = last;
  const bool prev_data_flag = prev != 0 && UsesDataFlags(static_cast<Codec>(prev - 1));
  if (prev == kWord || (!kDataFlag && !prev_data_flag)) {
    if (prev != kWord && threadIdx.x == 0) p.codec_state[blockIdx.x] = kWord;
    return true;
  }
  // 1. My ring rows of both phases, zeroed: a data-flag receiver takes any
  // non-zero word for data.
  if constexpr (kDataFlag) {
    constexpr size_t kRingBytes =
        static_cast<size_t>(kDataFlagRingRows * DataFlagRowBytes(kCodec, kWs));
    static_assert(kRingBytes % 16 == 0 && kRingBytes <= kTwoShotBlockPhaseBytes);
    char* const mine = p.buffers[p.rank] + blockIdx.x * kTwoShotBlockPhaseBytes;
    for (size_t off = threadIdx.x * 16; off < kRingBytes; off += kTwoShotThreads * 16) {
      platform::StoreRelaxedSys16(mine + p.data1 + off, Vec16{});
      platform::StoreRelaxedSys16(mine + p.data2 + off, Vec16{});
    }
  }
  // 2. Publish H once every thread's zeroing (and, from the previous call,
  // every read and clear of my buffer) is done.
  const uint32_t h = base + 1;
  __syncthreads();
  if (threadIdx.x == 0) {
    if (!kVariantSkipsFences) platform::FenceSystem();
    for (int r = 0; r < kWs; ++r) {
      if (r == p.rank) continue;
      for (int w = 0; w < kWarps; ++w)
        platform::AtomicStoreRelaxedSystem(CreditWord(p, r, w, p.rank), h);
    }
  }
  // 3. Every peer's H for this block, every warp.
  bool ok = true;
  const int r = threadIdx.x / kWarps;
  if (!kVariantSkipsWaits && threadIdx.x < kWs * kWarps && r != p.rank) {
    ok = WaitCredit(CreditWord(p, p.rank, threadIdx.x % kWarps, r), h, p);
  }
  if (__syncthreads_and(ok ? 1 : 0) == 0) return false;
  if (threadIdx.x == 0) p.codec_state[blockIdx.x] = kWord;
  base = h;
  return true;
}

// One block, persistent over tiles blockIdx.x, blockIdx.x + gridDim.x, ...
// The flag family (FP, INT6, INT3; two_shot.h).
template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
__global__ void __launch_bounds__(
    kTwoShotThreads, (CodecT<Elem<kElem>::kMathBf16, kTwoShotAtoms / kWs>::kMinBlocksPerSm))
    TwoShotKernel(KernelParams p) {
  constexpr int kA = kTwoShotAtoms / kWs;  // atoms per rank shard
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  using C = CodecT<kBf16, kA>;
  using Wire = typename C::Wire;
  static_assert(C::kShardWireBytes * kWs <= static_cast<size_t>(kTileSlotBytes), "slot too small");
  static_assert(!UsesDataFlags(kCodec));

  uint32_t base;
  if (!BeginTwoShotCall<kCodec, kWs>(p, base)) return;

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
  //
  // A rank's own shard never goes through memory: the Wire of its phase-1
  // shard stays in registers until the reduce, and its phase-2 shard is
  // decoded from registers (the same words the peers receive, so every rank
  // still decodes the same bits). Its slots in its own buffer go unused.
  auto row = [&](uint32_t colour) { return blockIdx.x * 2 + (colour & 1u); };
  auto flags = [&](size_t offset, uint32_t colour) {
    return reinterpret_cast<const uint32_t*>(p.buffers[p.rank] + offset) +
           row(colour) * kMaxWorldSize;
  };
  auto slot = [&](uint32_t colour) { return static_cast<size_t>(row(colour)) * kTileSlotBytes; };

  // This thread's input atoms of `tile`; atoms past the end read as zero
  // (sizes are whole atoms). FP prefetches the whole next tile as stored
  // (converting would wait for the loads) and converts a shard when it
  // encodes it; the integer codecs load and convert one shard at a time
  // right before encoding it, so only that shard's atoms take registers
  // (the whole tile's 32 registers next to the encode made the kernels
  // spill; 4 blocks per multiprocessor keep enough loads in flight).
  auto load_atom = [&](int tile, int i) { return LoadInputAtom(p, tile, i); };
  auto load_input = [&](int tile, Vec16(&atoms)[kTwoShotAtoms]) {
#pragma unroll
    for (int i = 0; i < kTwoShotAtoms; ++i) atoms[i] = load_atom(tile, i);
  };

  // Phase 1 of `tile`: shard r goes to rank r, row slot (block, my rank); my
  // own shard stays in `own`. `prefetched` holds the tile's input if
  // C::kPrefetchInput. The caller raises the flags.
  auto phase1 = [&](int tile, const Vec16(&prefetched)[kTwoShotAtoms], uint32_t colour, Wire& own) {
#pragma unroll
    for (int r = 0; r < kWs; ++r) {
      Vec16 shard[kA];
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        shard[k] = C::kPrefetchInput ? prefetched[r * kA + k] : load_atom(tile, r * kA + k);
      }
      const Wire w = C::template EncodeInput<kElem>(shard, tid);
      // Written unconditionally at r = 0 (exactly one r is my rank), so the
      // previous tile's `own` is dead here and takes no registers.
      if (r == 0 || r == p.rank) own = w;
      if (r != p.rank) {
        C::Store(w, p.buffers[r] + p.data1 + slot(colour) + p.rank * C::kShardWireBytes, tid);
      }
    }
  };

  auto store_output = [&](int tile, int s, const Wire& w) {
    StoreOutputShard<kElem, C, kA>(p, tile, s, w);
  };

  uint32_t colour = base + 1;
  int tile = blockIdx.x;  // < num_tiles: the grid never exceeds the tiles
  Vec16 input[kTwoShotAtoms];
  Wire own1;
  if (C::kPrefetchInput) load_input(tile, input);
  phase1(tile, input, colour, own1);
  SignalAll<kWs>(p.flags1, row(colour), colour, p);
  for (; tile < p.num_tiles; tile += gridDim.x) {
    const uint32_t c = colour;
    const bool more = tile + static_cast<int>(gridDim.x) < p.num_tiles;
    if (C::kPrefetchInput && more) load_input(tile + gridDim.x, input);
    if (!WaitAll<kWs>(flags(p.flags1, c), c, p)) return;

    // Reduce my shard in rank order 0..ws-1 (mine from registers).
    const char* my_data1 = p.buffers[p.rank] + p.data1 + slot(c);
    Wire src[kWs];
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      const Wire loaded = s == p.rank ? own1 : C::Load(my_data1 + s * C::kShardWireBytes, tid);
      src[s] = loaded;
    }
    Vec16 reduced[kA];
    C::Reduce(src, reduced);

    // Phase 2: the reduced shard, encoded once, goes to every other rank,
    // row slot (block, my rank); my output of it comes from the same words.
    {
      const Wire w2 = C::Encode(reduced, tid);
#pragma unroll
      for (int r = 0; r < kWs; ++r) {
        if (r != p.rank) {
          C::Store(w2, p.buffers[r] + p.data2 + slot(c) + p.rank * C::kShardWireBytes, tid);
        }
      }
      store_output(tile, p.rank, w2);
    }

    // The next tile's phase 1 goes out while this tile's phase 2 arrives,
    // and one fence publishes both.
    if (C::kOverlapNextTile && more) {
      phase1(tile + gridDim.x, input, ++colour, own1);
      SignalAllTwice<kWs>(p.flags2, row(c), c, p.flags1, row(colour), colour, p);
    } else {
      SignalAll<kWs>(p.flags2, row(c), c, p);
    }

    if (!WaitAll<kWs>(flags(p.flags2, c), c, p)) return;
    const char* my_data2 = p.buffers[p.rank] + p.data2 + slot(c);
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      if (s == p.rank) continue;
      store_output(tile, s, C::Load(my_data2 + s * C::kShardWireBytes, tid));
    }
    if (!C::kOverlapNextTile && more) {
      phase1(tile + gridDim.x, input, ++colour, own1);
      SignalAll<kWs>(p.flags1, row(colour), colour, p);
    }
  }
  if (tid == 0) p.colours[blockIdx.x] = colour;
}

// ---------------------------------------------------------------------------
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
      for (int k = 0; k < kA; ++k) in[k] = LoadInputAtom(p, tile, r * kA + k);
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
      StoreOutputShard<kElem, C, kA>(p, tile, p.rank, w2);
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
        StoreOutputShard<kElem, C, kA>(p, tile, s, w);
      }
    }
    if (!ok) return;
  }
  if (tid == 0) p.colours[blockIdx.x] = colour;
}

template <WorkFormat kElem, int kWs>
KernelFn PickCodec(Codec codec) {
  switch (codec) {
    case Codec::kFp:
      return TwoShotKernel<kElem, Codec::kFp, FpCodec, kWs>;
    case Codec::kInt8:
      if constexpr (UsesDataFlags(Codec::kInt8)) {
        return TwoShotDataFlagKernel<kElem, Codec::kInt8, Int8Codec, kWs>;
      } else {
        return TwoShotKernel<kElem, Codec::kInt8, Int8Codec, kWs>;
      }
    case Codec::kInt6:
      return TwoShotKernel<kElem, Codec::kInt6, Int6Codec, kWs>;
    case Codec::kInt4:
      if constexpr (UsesDataFlags(Codec::kInt4)) {
        return TwoShotDataFlagKernel<kElem, Codec::kInt4, Int4Codec, kWs>;
      } else {
        return TwoShotKernel<kElem, Codec::kInt4, Int4Codec, kWs>;
      }
    case Codec::kInt3:
      if constexpr (CodecRunsAtWorldSize(Codec::kInt3, kWs)) {
        return TwoShotKernel<kElem, Codec::kInt3, Int3Codec, kWs>;
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
  l.credits = l.oneshot + 2 * kOneShotRegionBytes;
  l.total = l.credits +
            round_up(static_cast<size_t>(max_blocks) * kTwoShotLayoutWarps * kMaxWorldSize * 4);
  return l;
}

int TwoShotGrid(size_t bytes, int max_blocks) {
  const size_t tiles = (bytes + kTileBytes - 1) / kTileBytes;
  return static_cast<int>(tiles < static_cast<size_t>(max_blocks) ? tiles : max_blocks);
}

const char* TwoShotSyncName() { return kDataFlagBuild ? "data_flag" : "flags"; }

const char* TwoShotTimingVariant() {
  if (gpu::kVariantSkipsWaits && gpu::kVariantSkipsFences) return "bare";
  if (gpu::kVariantSkipsWaits) return "no_waits";
  if (gpu::kVariantSkipsFences) return "no_fences";
  return "";
}

}  // namespace qr::kernels
