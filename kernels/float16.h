// Exact conversions between fp32 and the two 16-bit formats, as used by the
// codecs, the two-shot reference and every test that checks a GPU result.
//
// All narrowing conversions round to nearest, ties to even, and SATURATE:
// a finite fp32 value never becomes inf; it becomes the largest finite value
// of the target format (fp16 ±65504, bf16 ±3.3895e38). ±inf stays ±inf. Any
// NaN becomes the canonical quiet NaN of the target (fp16 0x7E00, bf16 0x7FC0,
// sign dropped), so results can be compared bit for bit. Subnormals are kept
// (no flush to zero) in both directions.
//
// Header-only and free of platform macros; every function is a pure function
// of its argument, thread-safe. A GPU port must produce the same bits (see
// docs/codecs.md "Arithmetic spec").
#ifndef QR_KERNELS_FLOAT16_H_
#define QR_KERNELS_FLOAT16_H_

#include <cstdint>
#include <cstring>

#include "kernels/types.h"

namespace qr::kernels {

inline constexpr uint16_t kFp16CanonicalNaN = 0x7E00;
inline constexpr uint16_t kBf16CanonicalNaN = 0x7FC0;
inline constexpr uint16_t kFp16Max = 0x7BFF;  // 65504
inline constexpr uint16_t kBf16Max = 0x7F7F;  // 3.38953139e38
inline constexpr uint16_t kFp16Inf = 0x7C00;
inline constexpr uint16_t kBf16Inf = 0x7F80;
inline constexpr float kFp16MaxValue = 65504.0f;

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Exact.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return BitsToFloat(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return BitsToFloat(sign);
  // Subnormal: value = mant * 2^-24, normalise into fp32.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return BitsToFloat(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

// Round to nearest even, saturating (see file comment).
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return kFp16CanonicalNaN;
  if (abs == 0x7F800000u) return sign | kFp16Inf;
  // 65520 = 65504 + half an ulp: from there on RNE would give inf.
  if (abs >= 0x477FF000u) return sign | kFp16Max;
  if (abs >= 0x38800000u) {  // normal in fp16 (>= 2^-14)
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
  }
  if (abs <= 0x33000000u) return sign;  // <= 2^-25: ties to even give zero
  // Subnormal in fp16: units of 2^-24.
  const uint32_t e = abs >> 23;
  const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t result = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

// Exact.
inline float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// Round to nearest even, saturating (see file comment).
inline uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return kBf16CanonicalNaN;
  if (abs == 0x7F800000u) return sign | kBf16Inf;
  const uint32_t rounded = abs + 0x7FFFu + ((abs >> 16) & 1u);
  if (rounded >= 0x7F800000u) return sign | kBf16Max;
  return sign | static_cast<uint16_t>(rounded >> 16);
}

// The saturating bf16 -> fp16 cast of cast_bf16_to_fp16: one RNE rounding;
// finite values beyond ±65504 become ±65504; ±inf stays ±inf; NaN -> 0x7E00.
inline uint16_t BFloat16ToHalf(uint16_t b) { return FloatToHalf(BFloat16ToFloat(b)); }

// fp16 -> bf16 (the cast back on output): one RNE rounding, never overflows.
inline uint16_t HalfToBFloat16(uint16_t h) { return FloatToBFloat16(HalfToFloat(h)); }

// Dtype-generic forms.
inline float ToFloat(DType dtype, uint16_t v) {
  return dtype == DType::kFloat16 ? HalfToFloat(v) : BFloat16ToFloat(v);
}
inline uint16_t FromFloat(DType dtype, float f) {
  return dtype == DType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
}

// Both formats keep the sign in bit 15 and order magnitudes like unsigned
// integers; a magnitude >= InfBits(dtype) is inf or NaN.
constexpr uint16_t InfBits(DType dtype) { return dtype == DType::kFloat16 ? kFp16Inf : kBf16Inf; }
constexpr uint16_t CanonicalNaN(DType dtype) {
  return dtype == DType::kFloat16 ? kFp16CanonicalNaN : kBf16CanonicalNaN;
}
constexpr bool IsFinite16(DType dtype, uint16_t v) { return (v & 0x7FFFu) < InfBits(dtype); }

}  // namespace qr::kernels

#endif  // QR_KERNELS_FLOAT16_H_
