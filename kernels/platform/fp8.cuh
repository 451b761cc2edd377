// The GPU's own fp32 -> FP8 e4m3 conversion, where it has one that rounds
// as kernels/float8.h specifies (to nearest even, saturating to ±448, NaN
// to 0x7F): NVIDIA's cvt.rn.satfinite.e4m3x2.f32 (sm_89 and later; the
// build targets sm_90). AMD's MI300 converts to the other e4m3 (FNUZ, bias
// 8), so there kE4m3Convert is false and callers convert in software.
// tests/gpu/fp8_gpu_test.cc holds the conversion to float8.h on every fp32
// value.
#ifndef QR_KERNELS_PLATFORM_FP8_CUH_
#define QR_KERNELS_PLATFORM_FP8_CUH_

#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

inline constexpr bool kE4m3Convert = QR_PLATFORM_CUDA != 0;

#if QR_PLATFORM_CUDA && defined(__CUDA_ARCH__)
static_assert(__CUDA_ARCH__ >= 890, "cvt to e4m3 needs sm_89");

// The e4m3 codes of a, b, c, d in bytes 0, 1, 2, 3.
QR_DEVICE_INLINE uint32_t E4m3x4SatRn(float a, float b, float c, float d) {
  uint16_t lo, hi;
  // The first source goes to the upper byte of the pair.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
  uint32_t w = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  // A NaN keeps its sign in the hardware's code; float8.h's has none.
  const uint32_t nan = __vcmpeq4(w & 0x7F7F7F7Fu, 0x7F7F7F7Fu);
  return w & ~(nan & 0x80808080u);
}
#else
QR_DEVICE_INLINE uint32_t E4m3x4SatRn(float, float, float, float) { return 0; }
#endif

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_FP8_CUH_
