// Device side of the all-reduce kernels: the two-shot kernel's parameters,
// waits and codec interface, shared with the one-shot kernel and the
// reduce-scatter / all-gather kernels (collective_kernels.cuh). Included by
// the kernels' .cu files and rank_state.cu (the launches) only.
//
// Work decomposition. A block of kTwoShotThreads threads processes one tile
// of kTileBytes per iteration; thread t holds atom i (16 bytes) at tile
// offset i * 4096 + t * 16. Rank r owns atoms [r * A, (r + 1) * A) with
// A = kTwoShotAtoms / world_size, i.e. the contiguous bytes
// [r * tile / ws, (r + 1) * tile / ws) of every tile.
//
// Per tile: encode shard r of the input and store it into rank r's phase-1
// slot (this block's row for the tile's parity, this source rank); signal;
// wait for every source; decode and sum in rank order 0..ws-1; re-encode the
// reduced shard and store it into every rank's phase-2 slot; signal; wait;
// decode every rank's shard into the output. The integer codecs send the
// next tile's phase 1 before that last wait (two_shot.cu says why the rows
// make it safe). Only equal block indices on different ranks wait on each
// other, so no block ever waits for another block of its own grid.
#ifndef QR_KERNELS_GPU_TWO_SHOT_DEVICE_CUH_
#define QR_KERNELS_GPU_TWO_SHOT_DEVICE_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/gpu/two_shot.h"
#include "kernels/platform/atomics.cuh"
#include "kernels/platform/device_macros.h"
#include "kernels/platform/half2.cuh"
#include "kernels/platform/math.cuh"
#include "kernels/platform/relaxed.cuh"
#include "kernels/platform/vec.cuh"

namespace qr::kernels::gpu {

using platform::Vec16;

// Timing variants (docs/performance.md, "Timing variants"): builds with
// `--define qr_two_shot_variant=no_waits|no_fences|bare` skip the flag waits,
// the system fences, or both, so that a profile or a timing shows what the
// rest of the kernel costs. Their results are wrong; nothing ships them, and
// TwoShotTimingVariant() (two_shot.h) names the variant a binary was built as.
#if defined(QR_TWO_SHOT_VARIANT_NO_WAITS) || defined(QR_TWO_SHOT_VARIANT_BARE)
inline constexpr bool kVariantSkipsWaits = true;
#else
inline constexpr bool kVariantSkipsWaits = false;
#endif
#if defined(QR_TWO_SHOT_VARIANT_NO_FENCES) || defined(QR_TWO_SHOT_VARIANT_BARE)
inline constexpr bool kVariantSkipsFences = true;
#else
inline constexpr bool kVariantSkipsFences = false;
#endif

// POD copy of everything the kernel needs; passed by value.
struct KernelParams {
  const char* in;
  char* out;
  size_t bytes;
  int rank;
  int num_tiles;
  char* buffers[kMaxWorldSize];
  size_t flags1, flags2, data1, data2;  // layout offsets
  size_t credits;                       // layout offset of the data-flag credits
  uint32_t* colours;
  uint32_t* codec_state;       // [max_blocks] CodecStateWord of each block's last two-shot call
  uint32_t* dev_error;         // device memory: first reason this rank gave up (sticky)
  const uint32_t* abort_word;  // host memory: read through AbortRaised only
  uint32_t* abort_read_at;     // device memory: when this rank last read abort_word
  uint32_t abort_read_ticks;   // the least wall-clock ticks between two such reads
  uint32_t* error_word;        // host-mapped copy the host reads without blocking
  uint64_t timeout_ticks;
  size_t oneshot;             // layout offset of the one-shot region
  uint32_t* oneshot_counter;  // [oneshot_blocks] each block's calls so far (picks its phase)
  int oneshot_blocks;         // OneShotStrideBlocks: block b owns rows b, b + this, ...
};

using KernelFn = void (*)(KernelParams);

// The two-shot kernel for (elem, ws, codec) (two_shot.cu); nullptr if
// unsupported.
KernelFn TwoShotKernelFor(WorkFormat elem, int ws, Codec codec);
// The one-shot kernel for (elem, ws) (one_shot.cu); nullptr if unsupported.
KernelFn OneShotKernelFor(WorkFormat elem, int ws);
// The one-shot kernel's fixed row stride: the rows (kOneShotThreads atoms)
// of the largest one-shot call, capped at the layout's max_blocks. The same
// for every call of a rank and on every rank (one_shot.cu says why it must be).
int OneShotStrideBlocks(int max_blocks, int world_size);
// The grid of a call of `bytes` bytes: the blocks owning one of its rows,
// min(rows, OneShotStrideBlocks); the same on every rank.
int OneShotGrid(size_t bytes, int max_blocks, int world_size);
inline constexpr int kOneShotThreads = 256;

// ---------------------------------------------------------------------------
// Waiting.

// Records why this rank gave up: the first reason wins on the device word
// (device-memory atomics), and the winner publishes it to the host word.
QR_DEVICE_INLINE void SetError(const KernelParams& p, uint32_t code) {
  if (platform::AtomicCasSystem(p.dev_error, kGpuErrorNone, code) == kGpuErrorNone) {
    platform::AtomicStoreRelaxedSystem(p.error_word, code);
  }
}

// Whether the group's abort word is raised, read at most once per
// abort_read_ticks for the whole rank. The word lives in host memory: every
// read is a PCIe round trip, and such reads from the waiting threads of many
// blocks at once (one per block every 64 polls) held up the GPU's own command
// fetch and the late rank's kernel: with one rank launched 20 µs late, a
// 1 MiB one-shot took 180 µs instead of 33 (docs/performance.md, "Known
// problems"). So the checks of all the rank's waits race for the device word
// abort_read_at (the low 32 bits of the wall clock at the last read): the
// one whose compare-and-swap moves it reads the host word, every other check
// returns false and reads dev_error instead, which a raised word reaches
// through SetError. While any thread of the rank waits, its checks keep
// coming, so a raised word is seen within abort_read_ticks and one check's
// spacing. Wrap-around of the low bits only delays one read by a period.
QR_DEVICE_INLINE bool AbortRaised(const KernelParams& p) {
  if (p.abort_word == nullptr) return false;
  const uint32_t now = static_cast<uint32_t>(platform::WallClock());
  const uint32_t last = platform::AtomicLoadRelaxedSystem(p.abort_read_at);
  if (now - last < p.abort_read_ticks) return false;
  if (platform::AtomicCasSystem(p.abort_read_at, last, now) != last) return false;
  return platform::AtomicLoadRelaxedSystem(p.abort_word) != 0;
}

// Called every 64 spins of a wait that started at `start`: true when the
// wait must give up (abort word raised, another block of this rank gave up,
// or past timeout_ticks), recording why.
QR_DEVICE_INLINE bool ShouldGiveUp(uint64_t start, const KernelParams& p) {
  if (AbortRaised(p)) {
    SetError(p, kGpuErrorAborted);
    return true;
  }
  if (platform::AtomicLoadRelaxedSystem(p.dev_error) != kGpuErrorNone) return true;
  if (p.timeout_ticks != 0 && platform::WallClock() - start > p.timeout_ticks) {
    SetError(p, kGpuErrorTimeout);
    return true;
  }
  return false;
}

// Spins until done(*word). Gives up (returns false) when the group's abort
// word is raised, when another block of this rank already gave up, or after
// timeout_ticks. Spins with relaxed loads and acquires once on the match (an
// acquire on every spin would order, and slow, each poll for nothing): the
// acquire orders this thread's later reads (and the block's, after the
// __syncthreads() that follows) after the peer's release of the word.
template <class Done>
QR_DEVICE_INLINE bool WaitWord(const uint32_t* word, Done done, const KernelParams& p) {
  if (!done(platform::AtomicLoadRelaxedSystem(word))) {
    const uint64_t start = platform::WallClock();
    uint32_t spins = 0;
    while (!done(platform::AtomicLoadRelaxedSystem(word))) {
      if ((++spins & 63u) == 0 && ShouldGiveUp(start, p)) return false;
      platform::PollPause();
    }
  }
  return done(platform::AtomicLoadAcquireSystem(word));
}

// WaitWord until *flag == colour.
QR_DEVICE_INLINE bool WaitFlag(const uint32_t* flag, uint32_t colour, const KernelParams& p) {
  return WaitWord(
      flag, [colour](uint32_t v) { return v == colour; }, p);
}

// Block-wide: thread s < ws waits for source s's flag in `flags` (this
// block's row). Returns false on every thread if any wait gave up.
template <int kWs>
QR_DEVICE_INLINE bool WaitAll(const uint32_t* row, uint32_t colour, const KernelParams& p) {
  bool ok = true;
  if (threadIdx.x < kWs && !kVariantSkipsWaits) ok = WaitFlag(row + threadIdx.x, colour, p);
  return __syncthreads_and(ok ? 1 : 0) != 0;
}

// Block-wide: after every thread's stores to the destination slots, thread
// r < ws publishes `colour` into rank r's flag for (`row`, this rank).
// The __syncthreads() orders the block's stores before the release.
template <int kWs>
QR_DEVICE_INLINE void SignalAll(size_t flags_offset, uint32_t row, uint32_t colour,
                                const KernelParams& p) {
  __syncthreads();
  if (threadIdx.x < kWs) {
    uint32_t* f = reinterpret_cast<uint32_t*>(p.buffers[threadIdx.x] + flags_offset) +
                  row * kMaxWorldSize + p.rank;
    if (kVariantSkipsFences) {
      platform::AtomicStoreRelaxedSystem(f, colour);
    } else {
      platform::AtomicStoreReleaseSystem(f, colour);
    }
  }
}

// SignalAll for two flags with one system fence: `colour_a` into the flags
// at `offset_a` (row_a) and `colour_b` into those at `offset_b` (row_b). A
// system fence costs microseconds (docs/performance.md, "Measurements behind
// the kernels' choices"), so the integer codecs raise phase 2 of one tile
// and phase 1 of the next together.
template <int kWs>
QR_DEVICE_INLINE void SignalAllTwice(size_t offset_a, uint32_t row_a, uint32_t colour_a,
                                     size_t offset_b, uint32_t row_b, uint32_t colour_b,
                                     const KernelParams& p) {
  __syncthreads();
  if (threadIdx.x < kWs) {
    uint32_t* base = reinterpret_cast<uint32_t*>(p.buffers[threadIdx.x]);
    if (!kVariantSkipsFences) platform::FenceSystem();
    platform::AtomicStoreRelaxedSystem(base + offset_a / 4 + row_a * kMaxWorldSize + p.rank,
                                       colour_a);
    platform::AtomicStoreRelaxedSystem(base + offset_b / 4 + row_b * kMaxWorldSize + p.rank,
                                       colour_b);
  }
}

// ---------------------------------------------------------------------------
// Element formats. A "raw" atom holds 8 16-bit values in memory order.

template <bool kBf16>
QR_DEVICE_INLINE float ToFloat(uint16_t x) {
  return kBf16 ? platform::Bf16BitsToFloat(x) : platform::Fp16BitsToFloat(x);
}

template <bool kBf16>
QR_DEVICE_INLINE uint16_t FromFloat(float f) {
  return kBf16 ? platform::FloatToBf16Bits(f) : platform::FloatToFp16Bits(f);
}

template <bool kBf16>
QR_DEVICE_INLINE void Unpack(const Vec16& v, float (&f)[8]) {
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = ToFloat<kBf16>(static_cast<uint16_t>(v.w[i] & 0xffffu));
    f[2 * i + 1] = ToFloat<kBf16>(static_cast<uint16_t>(v.w[i] >> 16));
  }
}

// FromFloat on each value (round-half-even, saturating, canonical NaN). Two
// values per conversion instruction; only an atom with an inf or NaN result
// (rare: inf/NaN data, or a finite sum past the largest finite value) takes
// the scalar path. Adding 1 to an all-ones exponent field carries into the
// half's top bit, so one AND and one ADD per word find them.
template <bool kBf16>
QR_DEVICE_INLINE Vec16 Pack(const float (&f)[8]) {
  constexpr uint32_t kExpMask = kBf16 ? 0x7F807F80u : 0x7C007C00u;
  constexpr uint32_t kExpOne = kBf16 ? 0x00800080u : 0x04000400u;
  Vec16 v;
  uint32_t special = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v.w[i] = kBf16 ? platform::FloatsToBf16x2Rn(f[2 * i], f[2 * i + 1])
                   : platform::FloatsToFp16x2Rn(f[2 * i], f[2 * i + 1]);
    special |= (v.w[i] & kExpMask) + kExpOne;
  }
  if (special & 0x80008000u) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v.w[i] = static_cast<uint32_t>(FromFloat<kBf16>(f[2 * i])) |
               (static_cast<uint32_t>(FromFloat<kBf16>(f[2 * i + 1])) << 16);
    }
  }
  return v;
}

// The rank-order reduce of a shard of kA atoms, the same for every codec
// that sums in fp32: per atom, the left fold of the kWs sources' decoded
// values (decode(r, k, v): source r's atom k as eight exact fp32 values),
// one IEEE addition at a time in rank order 0..kWs-1, rounded once by Pack.
// One atom's sum is live at a time.
template <bool kBf16, int kWs, int kA, class Decode>
QR_DEVICE_INLINE void FoldInRankOrder(Decode&& decode, Vec16 (&out)[kA]) {
#pragma unroll
  for (int k = 0; k < kA; ++k) {
    float acc[8];
    decode(0, k, acc);
#pragma unroll
    for (int r = 1; r < kWs; ++r) {
      float v[8];
      decode(r, k, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = platform::AddRn(acc[e], v[e]);
    }
    out[k] = Pack<kBf16>(acc);
  }
}

template <WorkFormat kElem>
struct Elem;

template <>
struct Elem<WorkFormat::kFp16> {
  static constexpr bool kMathBf16 = false;
  QR_DEVICE_INLINE static Vec16 In(Vec16 v) { return v; }
  QR_DEVICE_INLINE static Vec16 Out(Vec16 v) { return v; }
};

template <>
struct Elem<WorkFormat::kBf16> {
  static constexpr bool kMathBf16 = true;
  QR_DEVICE_INLINE static Vec16 In(Vec16 v) { return v; }
  QR_DEVICE_INLINE static Vec16 Out(Vec16 v) { return v; }
};

// Whether a half of the atom's fp16x2 words is inf or NaN, in one fma per
// word: h * 0 is +-0 for every finite h and NaN for inf and NaN, a NaN
// addend stays NaN, and sums of zeros are zeros; so the fold is +-0 in both
// halves exactly when every half is finite.
QR_DEVICE_INLINE bool AnyNonFiniteHalf(const Vec16& v) {
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) acc = platform::FmaRnHalf2(v.w[i], 0u, acc);
  return (acc & 0x7FFF7FFFu) != 0;
}

// Saturating bf16 -> fp16 (kernels/float16.h BFloat16ToHalf: a finite input
// never becomes inf, NaN becomes 0x7E00) and back (HalfToBFloat16, NaN
// becomes 0x7FC0). The packed conversions (platform/math.cuh, 3
// instructions per pair) give the same bits except where a half comes out
// with an all-ones exponent (In: past 65520, inf, NaN; Out: NaN), and the
// scalar conversions of the *Exact forms take those atoms. In and Out find
// them per atom (AnyNonFiniteHalf); the integer codecs find them in the
// block maxima they compute anyway and call InFast / OutFast (int_wire.cuh
// InputBlocks, the codecs' DecodeOut).
template <>
struct Elem<WorkFormat::kBf16Cast> {
  static constexpr bool kMathBf16 = false;
  // Exact unless a result half is inf or NaN.
  QR_DEVICE_INLINE static Vec16 InFast(const Vec16& v) {
    Vec16 h;
#pragma unroll
    for (int i = 0; i < 4; ++i) h.w[i] = platform::Bf16x2ToFp16x2Rn(v.w[i]);
    return h;
  }
  QR_DEVICE_INLINE static Vec16 InExact(const Vec16& v) {
    Vec16 h;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h.w[i] = ToHalfExact(v.w[i] & 0xFFFFu) | (ToHalfExact(v.w[i] >> 16) << 16);
    }
    return h;
  }
  QR_DEVICE_INLINE static Vec16 In(const Vec16& v) {
    const Vec16 h = InFast(v);
    return AnyNonFiniteHalf(h) ? InExact(v) : h;
  }
  // Exact unless an input half is NaN.
  QR_DEVICE_INLINE static Vec16 OutFast(const Vec16& v) {
    Vec16 b;
#pragma unroll
    for (int i = 0; i < 4; ++i) b.w[i] = platform::Fp16x2ToBf16x2Rn(v.w[i]);
    return b;
  }
  QR_DEVICE_INLINE static Vec16 OutExact(const Vec16& v) {
    Vec16 b;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      b.w[i] = ToBf16Exact(v.w[i] & 0xFFFFu) | (ToBf16Exact(v.w[i] >> 16) << 16);
    }
    return b;
  }
  QR_DEVICE_INLINE static Vec16 Out(const Vec16& v) {
    return AnyNonFiniteHalf(v) ? OutExact(v) : OutFast(v);
  }

 private:
  QR_DEVICE_INLINE static uint32_t ToHalfExact(uint32_t b) {
    return FromFloat<false>(ToFloat<true>(static_cast<uint16_t>(b)));
  }
  QR_DEVICE_INLINE static uint32_t ToBf16Exact(uint32_t h) {
    return FromFloat<true>(ToFloat<false>(static_cast<uint16_t>(h)));
  }
};

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_TWO_SHOT_DEVICE_CUH_
