// The device side of the packed-fp16 codecs (kernels/packed_codec.h, whose
// definitions these compute bit for bit on their fast path): two values per
// 32-bit word, one fp16x2 instruction per step. Each function is per thread
// (no collective contract). Fast path only: the caller sends blocks whose
// maximum lies outside packed::FastPathAbsmax, NaN/inf blocks, and reduces
// that could overflow, to the exact slow path.
#ifndef QR_KERNELS_GPU_PACKED_CODEC_CUH_
#define QR_KERNELS_GPU_PACKED_CODEC_CUH_

#include <cstdint>

#include "kernels/platform/device_macros.h"
#include "kernels/platform/half2.cuh"

namespace qr::kernels::gpu {

// The constants of one codec (bits 3, 4 or 6), each as two equal fp16 halves.
struct PackedConstants {
  uint32_t magic;     // 1024 + Q: quantize lands the code in the low bits
  uint32_t code_top;  // 2^(10-s): OR-ing a code u into its mantissa gives 2^(10-s) + u / 2^s
  uint32_t unbias;    // -(2^(10-s) + Q / 2^s): adding it leaves k / 2^s, exactly
};

QR_HOST_DEVICE_INLINE constexpr uint32_t Half2Of(uint32_t half_bits) {
  return half_bits | (half_bits << 16);
}

// bits 3, 4, 6 -> s 1, 2, 4, Q 4, 8, 32.
QR_HOST_DEVICE_INLINE constexpr PackedConstants PackedConstantsFor(int bits) {
  const uint32_t s = bits == 3 ? 1 : bits == 4 ? 2 : 4;
  const uint32_t q = 1u << (bits - 1);
  const uint32_t top_field = 25 - s;  // exponent field of 2^(10-s)
  return PackedConstants{Half2Of(0x6400u + q), Half2Of(top_field << 10),
                         Half2Of(0x8000u | (top_field << 10) | q)};
}

// Codes of two values x (fp16x2) against the block's multiplier e (fp16x2):
// u = Q + rint_even(x * e) in each half's low 10 bits (the fp16 1024 + u).
QR_DEVICE_INLINE uint32_t QuantizePair(PackedConstants c, uint32_t x, uint32_t e) {
  return platform::FmaRnHalf2(x, e, c.magic) & 0x03FF03FFu;
}

// k / 2^s of two codes (u in each half's low bits), exact.
QR_DEVICE_INLINE uint32_t CodeValuePair(PackedConstants c, uint32_t codes) {
  return platform::AddRnHalf2(codes | c.code_top, c.unbias);
}

// x' = RN16((k / 2^s) * d~) for two codes and their scale words.
QR_DEVICE_INLINE uint32_t DecodePair(PackedConstants c, uint32_t codes, uint32_t scale) {
  return platform::MulRnHalf2(CodeValuePair(c, codes), scale);
}

// y = RN16((k1 / 2^s) * d~1 + x'0): rank 1's codes folded into rank 0's
// decoded values, one rounding per half.
QR_DEVICE_INLINE uint32_t FusedReducePair(PackedConstants c, uint32_t codes1, uint32_t scale1,
                                          uint32_t decoded0) {
  return platform::FmaRnHalf2(CodeValuePair(c, codes1), scale1, decoded0);
}

// sat16 of two fp16 results of finite operands: an infinite half (an exact
// result at or past 65520 in magnitude, rounded to inf) becomes ±65504, the
// saturated value the definition gives; others are kept. An all-ones
// exponent plus one carries into the half's top bit; inf - 1 is 65504 with
// the same sign. (A NaN half is changed too: callers replace NaN results.)
QR_HOST_DEVICE_INLINE constexpr uint32_t SaturateInfPair(uint32_t w) {
  const uint32_t special = ((w & 0x7C007C00u) + 0x04000400u) & 0x80008000u;
  return w - (special >> 15);
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_PACKED_CODEC_CUH_
