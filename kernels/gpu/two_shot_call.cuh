// The start of every two-shot-family call, block-wide: the sticky error, the
// colours, and the codec-change handshake of two_shot.h with the data-flag
// credit words it stores through. Included by the two-shot kernels
// (two_shot.cu, two_shot_data_flag.cuh) and the kernels that reuse their
// phases (reduce_scatter.cu, all_gather.cu).
#ifndef QR_KERNELS_GPU_TWO_SHOT_CALL_CUH_
#define QR_KERNELS_GPU_TWO_SHOT_CALL_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/launch.cuh"

namespace qr::kernels::gpu {

inline constexpr int kTwoShotWarps = kTwoShotThreads / platform::kWarpSize;
static_assert(kTwoShotWarps <= kTwoShotLayoutWarps, "the layout has a credit word per warp");

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

// The codec state word a call of `kCodec` records: its own, except for a
// flag-family kernel of a codec this build runs with data flags (a
// reduce-scatter or all-gather, collective_kernels.cuh), which records FP's,
// a flag-family word, so that the next data-flag call of that codec runs the
// handshake.
template <Codec kCodec, bool kDataFlag>
inline constexpr uint32_t kCallStateWord = CodecStateWord(kDataFlag || !UsesDataFlags(kCodec)
                                                              ? kCodec
                                                              : Codec::kFp);

// The start of every two-shot call, block-wide: false when this rank has
// given up (now or during the handshake). Else `base` is the colour before
// the call's first tile, after the codec-change handshake of two_shot.h
// where this block's last two-shot call needs one. kDataFlag: whether the
// calling kernel is of the data-flag family (the reduce-scatter and
// all-gather kernels pass false for every codec).
template <Codec kCodec, int kWs, bool kDataFlag = UsesDataFlags(kCodec)>
QR_DEVICE_INLINE bool BeginTwoShotCall(const KernelParams& p, uint32_t& base) {
  static_assert(!kDataFlag || UsesDataFlags(kCodec), "only a data-flag codec has such kernels");
  // Before anything the previous kernel may touch (programmatic launch,
  // kernels/platform/launch.cuh): the state words, the slots, the input.
  // Every kernel that starts here (two-shot, reduce-scatter, all-gather)
  // gets it.
  platform::WaitForPriorKernels();
  constexpr uint32_t kWord = kCallStateWord<kCodec, kDataFlag>;
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
      for (int w = 0; w < kTwoShotWarps; ++w)
        platform::AtomicStoreRelaxedSystem(CreditWord(p, r, w, p.rank), h);
    }
  }
  // 3. Every peer's H for this block, every warp.
  bool ok = true;
  const int r = threadIdx.x / kTwoShotWarps;
  if (!kVariantSkipsWaits && threadIdx.x < kWs * kTwoShotWarps && r != p.rank) {
    ok = WaitCredit(CreditWord(p, p.rank, threadIdx.x % kTwoShotWarps, r), h, p);
  }
  if (__syncthreads_and(ok ? 1 : 0) == 0) return false;
  if (threadIdx.x == 0) p.codec_state[blockIdx.x] = kWord;
  base = h;
  return true;
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_TWO_SHOT_CALL_CUH_
