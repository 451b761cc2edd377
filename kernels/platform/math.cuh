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
// Correctly rounded square root (never an rsqrt approximation).
QR_DEVICE_INLINE float SqrtRn(float a) { return __fsqrt_rn(a); }

QR_DEVICE_INLINE float Fp16BitsToFloat(uint16_t h) {
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}

// Round-half-even and SATURATING like kernels/float16.h FloatToHalf: a
// finite value never becomes inf, NaN becomes the canonical 0x7E00. The
// hardware conversion rounds (subnormals included); only its overflow and
// NaN results are patched.
QR_DEVICE_INLINE uint16_t FloatToFp16Bits(float f) {
  const uint32_t abs = __float_as_uint(f) & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0x7E00u;
  const __half_raw r = static_cast<__half_raw>(__float2half_rn(f));
  uint16_t h = r.x;
  if ((h & 0x7FFFu) == 0x7C00u && abs != 0x7F800000u) h = (h & 0x8000u) | 0x7BFFu;
  return h;
}

QR_DEVICE_INLINE float Bf16BitsToFloat(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// Round-half-even and saturating like kernels/float16.h FloatToBFloat16; NaN
// becomes the canonical 0x7FC0.
QR_DEVICE_INLINE uint16_t FloatToBf16Bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0x7FC0u;
  if (abs == 0x7F800000u) return sign | 0x7F80u;
  const uint32_t rounded = abs + 0x7FFFu + ((abs >> 16) & 1u);
  if (rounded >= 0x7F800000u) return sign | 0x7F7Fu;
  return sign | static_cast<uint16_t>(rounded >> 16);
}

// Two values rounded half-even to fp16 / bf16 in one conversion, lo in bits
// 0-15, hi in 16-31. Unlike the scalar functions above they need NOT
// saturate nor canonicalise NaN: a result with an all-ones exponent (inf or
// NaN) may differ from FloatToFp16Bits / FloatToBf16Bits, every other result
// equals it. Callers check the exponents and take the scalar path then.
QR_DEVICE_INLINE uint32_t FloatsToFp16x2Rn(float lo, float hi) {
#if QR_PLATFORM_CUDA
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return FloatToFp16Bits(lo) | (static_cast<uint32_t>(FloatToFp16Bits(hi)) << 16);
#endif
}

QR_DEVICE_INLINE uint32_t FloatsToBf16x2Rn(float lo, float hi) {
#if QR_PLATFORM_CUDA
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return FloatToBf16Bits(lo) | (static_cast<uint32_t>(FloatToBf16Bits(hi)) << 16);
#endif
}

// bf16x2 -> fp16x2, each half rounded half-even from its exact value: two
// moves of the bf16 fields into fp32 and one packed conversion (NVIDIA: 3
// instructions). Neither saturating nor canonical: a half past 65520 in
// magnitude becomes inf, a NaN half keeps an unspecified payload, and every
// other half equals FloatToFp16Bits(Bf16BitsToFloat(.)). Callers find the
// exceptions by their all-ones exponent and convert those again.
QR_DEVICE_INLINE uint32_t Bf16x2ToFp16x2Rn(uint32_t w) {
  return FloatsToFp16x2Rn(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
}

// fp16x2 -> bf16x2: two exact widenings and one packed conversion (NVIDIA: 3
// instructions). Never overflows; only a NaN half may differ from
// FloatToBf16Bits(Fp16BitsToFloat(.)) (unspecified payload).
QR_DEVICE_INLINE uint32_t Fp16x2ToBf16x2Rn(uint32_t w) {
  return FloatsToBf16x2Rn(Fp16BitsToFloat(static_cast<uint16_t>(w & 0xFFFFu)),
                          Fp16BitsToFloat(static_cast<uint16_t>(w >> 16)));
}

// Lane-wise maximum of two pairs of unsigned 16-bit integers.
QR_DEVICE_INLINE uint32_t MaxU16x2(uint32_t a, uint32_t b) {
#if QR_PLATFORM_CUDA
  uint32_t r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  const uint32_t lo = max(a & 0xffffu, b & 0xffffu);
  const uint32_t hi = max(a >> 16, b >> 16);
  return lo | (hi << 16);
#endif
}

// Lane-wise minimum of two pairs of unsigned 16-bit integers.
QR_DEVICE_INLINE uint32_t MinU16x2(uint32_t a, uint32_t b) {
#if QR_PLATFORM_CUDA
  uint32_t r;
  asm("min.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  const uint32_t lo = min(a & 0xffffu, b & 0xffffu);
  const uint32_t hi = min(a >> 16, b >> 16);
  return lo | (hi << 16);
#endif
}

// Each 16-bit lane of x clamped to [lo, hi] (unsigned; lo and hi hold the
// same bound in both lanes).
QR_DEVICE_INLINE uint32_t ClampU16x2(uint32_t x, uint32_t lo, uint32_t hi) {
  return MinU16x2(MaxU16x2(x, lo), hi);
}

// Byte k of the result is byte (selector >> 4k) & 7 of the 8 bytes
// {a (bytes 0-3), b (bytes 4-7)} (CUDA's __byte_perm without sign modes).
QR_DEVICE_INLINE uint32_t BytePerm(uint32_t a, uint32_t b, uint32_t selector) {
#if QR_PLATFORM_CUDA
  return __byte_perm(a, b, selector);
#else
  const uint64_t both = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    r |= static_cast<uint32_t>((both >> (8 * ((selector >> (4 * k)) & 7u))) & 0xffu) << (8 * k);
  }
  return r;
#endif
}

// Round to nearest integer, ties to even (rintf).
QR_DEVICE_INLINE float RintRn(float x) { return rintf(x); }

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_MATH_CUH_
