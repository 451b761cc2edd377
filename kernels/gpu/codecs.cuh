// Device codecs for the two-shot kernel. A codec C<kBf16, kA> moves one
// thread's share of one rank segment (kA atoms of 8 values) to and from the
// wire, cooperating with the other threads of its block:
//   kSegWireBytes             wire bytes of one whole segment (all threads)
//   Encode(raw[kA], dst, tid) stores the segment's wire form at dst
//   Decode(src, tid, v[kA][8]) reads it back as exact float values
//   Accumulate(acc, x)        one step of the rank-order sum
// Values are the math format (fp16 or bf16 bit patterns, kBf16 says which).
#ifndef QR_KERNELS_GPU_CODECS_CUH_
#define QR_KERNELS_GPU_CODECS_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

// FP: raw 16-bit values, laid out on the wire as in the tile.
template <bool kBf16, int kA>
struct FpCodec {
  static constexpr size_t kSegWireBytes = static_cast<size_t>(kA) * kTwoShotThreads * 16;

  QR_DEVICE_INLINE static void Encode(const Vec16 (&raw)[kA], char* dst, int tid) {
#pragma unroll
    for (int k = 0; k < kA; ++k) platform::StoreRemote16(dst + (k * kTwoShotThreads + tid) * 16, raw[k]);
  }

  QR_DEVICE_INLINE static void Decode(const char* src, int tid, float (&v)[kA][8]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      Unpack<kBf16>(platform::LoadShared16(src + (k * kTwoShotThreads + tid) * 16), v[k]);
    }
  }

  QR_DEVICE_INLINE static float Accumulate(float acc, float x) { return platform::AddRn(acc, x); }
};

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODECS_CUH_
