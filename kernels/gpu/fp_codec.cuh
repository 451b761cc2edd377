// The FP two-shot codec: raw 16-bit values, laid out on the wire as in the
// tile (the codec contract: kernels/gpu/codecs.cuh).
#ifndef QR_KERNELS_GPU_FP_CODEC_CUH_
#define QR_KERNELS_GPU_FP_CODEC_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/geometry.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

// FP: raw 16-bit values, laid out on the wire as in the tile.
template <bool kBf16, int kA>
struct FpCodec {
  static constexpr size_t kShardWireBytes = static_cast<size_t>(kA) * kTwoShotThreads * 16;
  // FP is link bound: sending the next tile's phase 1 early only crowds the
  // link (docs/performance.md, "Measurements behind the kernels' choices").
  static constexpr bool kOverlapNextTile = false;
  // Instead, the next tile's input is loaded at the start of this one, so
  // its memory latency hides behind the tile's two phases (two blocks per
  // multiprocessor leave the registers for it).
  static constexpr bool kPrefetchInput = true;
  static constexpr int kMinBlocksPerSm = kTwoShotFpBlocksPerSm;

  struct Wire {
    Vec16 v[kA];
  };

  // The Wire of this thread's atoms of input in kIn (the work dtype, or
  // bf16 to be cast to it).
  template <WorkFormat kIn>
  QR_DEVICE_INLINE static Wire EncodeInput(const Vec16 (&in)[kA], int) {
    Wire w;
#pragma unroll
    for (int k = 0; k < kA; ++k) w.v[k] = Elem<kIn>::In(in[k]);
    return w;
  }

  QR_DEVICE_INLINE static Wire Encode(const Vec16 (&raw)[kA], int tid) {
    return EncodeInput<(kBf16 ? WorkFormat::kBf16 : WorkFormat::kFp16)>(raw, tid);
  }

  QR_DEVICE_INLINE static void Store(const Wire& w, char* dst, int tid) {
#pragma unroll
    for (int k = 0; k < kA; ++k)
      platform::StoreRemote16(dst + (k * kTwoShotThreads + tid) * 16, w.v[k]);
  }

  QR_DEVICE_INLINE static Wire Load(const char* src, int tid) {
    Wire w;
#pragma unroll
    for (int k = 0; k < kA; ++k)
      w.v[k] = platform::LoadShared16(src + (k * kTwoShotThreads + tid) * 16);
    return w;
  }

  template <int kWs>
  QR_DEVICE_INLINE static void Reduce(const Wire (&src)[kWs], Vec16 (&out)[kA]) {
    FoldInRankOrder<kBf16, kWs>([&](int r, int k, float(&v)[8]) { Unpack<kBf16>(src[r].v[k], v); },
                                out);
  }

  // Phase-2 shards hold Pack's output, which Pack(Unpack(.)) leaves as is.
  template <WorkFormat kOut, class Sink>
  QR_DEVICE_INLINE static void DecodeOut(const Wire& w, Sink&& sink) {
#pragma unroll
    for (int k = 0; k < kA; ++k) sink(k, Elem<kOut>::Out(w.v[k]));
  }
};

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_FP_CODEC_CUH_
