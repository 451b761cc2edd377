// FP8 e4m3 (the OCP E4M3FN format: 1 sign, 4 exponent bits biased by 7, 3
// mantissa bits, no infinities, 0x7F / 0xFF the NaNs, largest finite ±448),
// the quantized output of the fused all-reduce + RMSNorm
// (qr_all_reduce_residual_rmsnorm_fp8, docs/fused.md "FP8 output").
//
// Narrowing rounds to nearest, ties to even, and SATURATES: a magnitude at
// or beyond 448, infinity included, becomes ±448 (what CUDA's satfinite
// conversion and vLLM's clamp-then-convert give); any NaN becomes 0x7F
// (sign dropped, as float16.h canonicalizes NaNs); subnormals (steps of
// 2^-9) are kept. Integer arithmetic on the fp32 bits only, and constexpr:
// the host reference and the GPU kernels (where constexpr functions are
// callable from device code) run these very functions, so their bits agree.
#ifndef QR_KERNELS_FLOAT8_H_
#define QR_KERNELS_FLOAT8_H_

#include <cstdint>

namespace qr::kernels {

inline constexpr uint8_t kE4m3Max = 0x7E;  // 448
inline constexpr uint8_t kE4m3NaN = 0x7F;
inline constexpr float kE4m3MaxValue = 448.0f;

// The e4m3 code nearest the fp32 value whose bits are `f` (file comment).
constexpr uint8_t E4m3FromFloatBits(uint32_t f) {
  const auto sign = static_cast<uint8_t>((f >> 24) & 0x80u);
  const uint32_t mag = f & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return kE4m3NaN;
  if (mag >= 0x43E00000u) return static_cast<uint8_t>(sign | kE4m3Max);  // >= 448
  const uint32_t exp = mag >> 23;
  if (exp >= 121) {
    // Normal in e4m3 (>= 2^-6): keep 3 of the 23 mantissa bits, to nearest
    // even at bit 20; a carry out of the mantissa bumps the exponent, and
    // nothing below 448 rounds past 0x7E.
    const uint32_t rounded = mag + 0x7FFFFu + ((mag >> 20) & 1u);
    return static_cast<uint8_t>(sign | ((rounded >> 20) - (120u << 3)));
  }
  // Subnormal in e4m3: the code is the value in units of 2^-9, to nearest
  // even; 8 units (2^-6) is code 0x08, the smallest normal, as it should be.
  // fp32 zeros and subnormals are far below half a unit.
  if (exp == 0) return sign;
  const uint32_t significand = (mag & 0x7FFFFFu) | 0x800000u;  // value = s * 2^(exp - 150)
  const uint32_t shift = 141u - exp;                           // units = s >> shift, >= 21
  if (shift >= 32) return sign;
  const uint32_t units = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t up = rest > half || (rest == half && (units & 1u) != 0) ? 1u : 0u;
  return static_cast<uint8_t>(sign | (units + up));
}

// The fp32 bits of an e4m3 code (exact); NaN codes give an fp32 quiet NaN.
constexpr uint32_t E4m3ToFloatBits(uint8_t q) {
  const uint32_t sign = static_cast<uint32_t>(q & 0x80u) << 24;
  const uint32_t exp = (q >> 3) & 0xFu;
  uint32_t mant = q & 0x7u;
  if ((q & 0x7Fu) == kE4m3NaN) return sign | 0x7FC00000u;
  if (exp != 0) return sign | ((exp + 120u) << 23) | (mant << 20);
  if (mant == 0) return sign;
  // mant * 2^-9: normalize into fp32.
  uint32_t e = 121;  // fp32 biased exponent of 2^-6
  while ((mant & 0x8u) == 0) {
    mant <<= 1;
    --e;
  }
  return sign | (e << 23) | ((mant & 0x7u) << 20);
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_FLOAT8_H_
