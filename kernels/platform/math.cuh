// Exact scalar arithmetic for device code: fp32 operations that the compiler
// may not contract into FMAs (the host reference rounds every product and sum
// separately), and fp16/bf16 <-> fp32 conversions with round-half-even.
// Values travel as raw 16-bit patterns so both vendors share the same code.
#ifndef QR_KERNELS_PLATFORM_MATH_CUH_
#define QR_KERNELS_PLATFORM_MATH_CUH_

#include <hip/hip_fp16.h>

#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

QR_DEVICE_INLINE float AddRn(float a, float b) { return __fadd_rn(a, b); }
QR_DEVICE_INLINE float MulRn(float a, float b) { return __fmul_rn(a, b); }
QR_DEVICE_INLINE float DivRn(float a, float b) { return __fdiv_rn(a, b); }

QR_DEVICE_INLINE float Fp16BitsToFloat(uint16_t h) {
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}

// Round-half-even; overflow becomes inf, NaN stays NaN.
QR_DEVICE_INLINE uint16_t FloatToFp16Bits(float f) {
  __half_raw r = static_cast<__half_raw>(__float2half_rn(f));
  return r.x;
}

QR_DEVICE_INLINE float Bf16BitsToFloat(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// Round-half-even; NaN stays a (quiet) NaN.
QR_DEVICE_INLINE uint16_t FloatToBf16Bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_MATH_CUH_
