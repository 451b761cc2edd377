// A host model of the device's packed bf16 <-> fp16 conversions
// (kernels/platform/math.cuh Bf16x2ToFp16x2Rn and Fp16x2ToBf16x2Rn: one IEEE
// round-to-nearest-even of each half's exact value, overflow to inf,
// subnormals kept, NaN with an unspecified payload) and of the test that
// sends a value to the exact scalar conversion: an all-ones exponent in the
// fp16 half (Elem<WorkFormat::kBf16Cast>, two_shot_device.cuh; the integer
// codecs see it in the block maximum, int_wire.cuh InputBlock).
//
// packed_cast_test.cc checks on the host, for all 65536 inputs each way,
// that wherever the test lets the fast result through it equals
// kernels/float16.h's BFloat16ToHalf / HalfToBFloat16; packed_cast_gpu_test
// (tests/gpu) checks that the GPU computes this model, and that the device
// conversions with their test equal float16.h, for every input in both
// halves of a pair. The model is an independent formulation (one rounding
// routine for any binary format), not a copy of float16.h.
#ifndef QR_KERNELS_GPU_PACKED_CAST_H_
#define QR_KERNELS_GPU_PACKED_CAST_H_

#include <cstdint>

namespace qr::kernels::gpu::cast_model {

// The NaN the model gives; the hardware's payload may differ (any NaN is
// sent to the exact path, so only the NaN-ness matters).
inline constexpr uint16_t kModelNaN = 0x7FFF;

// RN(-1^neg * sig * 2^exp2) in the binary format with exp_bits exponent and
// mant_bits stored mantissa bits: round to nearest, ties to even,
// subnormal results kept, overflow to inf. sig < 2^40.
constexpr uint16_t RoundToFormat(bool neg, uint64_t sig, int exp2, int exp_bits, int mant_bits) {
  const uint32_t sign = neg ? 1u << (exp_bits + mant_bits) : 0u;
  const uint32_t inf = ((1u << exp_bits) - 1u) << mant_bits;
  if (sig == 0) return static_cast<uint16_t>(sign);
  const int bias = (1 << (exp_bits - 1)) - 1;
  int top = exp2;  // floor(log2 |value|)
  for (uint64_t s = sig; s > 1; s >>= 1) ++top;
  // The exponent of the result's last place: that of a normal number of the
  // value's binade, or the subnormals' fixed one.
  const int place = (top > 1 - bias ? top : 1 - bias) - mant_bits;
  const int drop = place - exp2;
  uint64_t q = 0;
  if (drop <= 0) {
    q = sig << -drop;
  } else if (drop < 64) {
    q = sig >> drop;
    const uint64_t rem = sig & ((uint64_t{1} << drop) - 1u);
    const uint64_t half = uint64_t{1} << (drop - 1);
    if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
  }
  // q counts places; a normal q carries its leading one into the exponent
  // field (and a carry out of the mantissa moves it up a binade).
  const uint64_t bits = (static_cast<uint64_t>(place + mant_bits + bias - 1) << mant_bits) + q;
  if (bits >= inf) return static_cast<uint16_t>(sign | inf);
  return static_cast<uint16_t>(sign | bits);
}

// One half of Bf16x2ToFp16x2Rn.
constexpr uint16_t Bf16ToFp16Rn(uint16_t b) {
  const bool neg = (b & 0x8000u) != 0;
  const uint32_t e = (b >> 7) & 0xFFu;
  const uint32_t m = b & 0x7Fu;
  if (e == 0xFFu) return m != 0 ? kModelNaN : static_cast<uint16_t>(neg ? 0xFC00u : 0x7C00u);
  if (e == 0) return RoundToFormat(neg, m, -133, 5, 10);  // m * 2^-133
  return RoundToFormat(neg, m | 0x80u, static_cast<int>(e) - 134, 5, 10);
}

// One half of Fp16x2ToBf16x2Rn.
constexpr uint16_t Fp16ToBf16Rn(uint16_t h) {
  const bool neg = (h & 0x8000u) != 0;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1Fu) return m != 0 ? kModelNaN : static_cast<uint16_t>(neg ? 0xFF80u : 0x7F80u);
  if (e == 0) return RoundToFormat(neg, m, -24, 8, 7);  // m * 2^-24
  return RoundToFormat(neg, m | 0x400u, static_cast<int>(e) - 25, 8, 7);
}

constexpr uint32_t Bf16x2ToFp16x2Rn(uint32_t w) {
  return Bf16ToFp16Rn(static_cast<uint16_t>(w & 0xFFFFu)) |
         (static_cast<uint32_t>(Bf16ToFp16Rn(static_cast<uint16_t>(w >> 16))) << 16);
}

constexpr uint32_t Fp16x2ToBf16x2Rn(uint32_t w) {
  return Fp16ToBf16Rn(static_cast<uint16_t>(w & 0xFFFFu)) |
         (static_cast<uint32_t>(Fp16ToBf16Rn(static_cast<uint16_t>(w >> 16))) << 16);
}

// The exact path's trigger on an fp16 half: inf or NaN. In applies it to its
// result, Out to its input; a block maximum >= 0x7C00 means some half of
// the block has it.
constexpr bool IsNonFiniteHalf(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }

constexpr bool IsNaNBf16(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }
constexpr bool IsNaNFp16(uint16_t h) { return (h & 0x7FFFu) > 0x7C00u; }

}  // namespace qr::kernels::gpu::cast_model

#endif  // QR_KERNELS_GPU_PACKED_CAST_H_
