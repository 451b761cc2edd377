// The packed-fp16 arithmetic of INT3, INT4 and INT6 (issue 18, step 1): the
// definition that a GPU kernel computes with one fma.rn.f16x2 per two values
// to quantize, one add.f16x2 and one mul.f16x2 to decode, and one fma.f16x2
// for the world-size-2 reduce, and that this host code computes exactly.
//
// Per block of 32 fp16 values with largest magnitude a (finite, > 0), and for
// a codec with Q = 2^(bits-1), K = Q - 1/2, L = 2Q - 1, shift s (INT3 1,
// INT4 2, INT6 4):
//   e  = the largest number with an 11-bit significand strictly below K / a
//        (the encode multiplier; never on the wire);
//   d~ = RN16(2^s / e)                       the fp16 scale word on the wire;
//   k  = rint_even(x * e)                    |k| <= Q - 1 for |x| <= a, so no
//                                            clamp; the code is u = k + Q;
//   x' = RN16((k / 2^s) * d~)                decode (k / 2^s is an exact fp16);
//   y  = sat16(RN16((k1 / 2^s) * d~1 + x'0)) the world-size-2 reduce, rank
//                                            order, one rounding.
// The 2^s keeps d~ normal for small blocks. A zero block sends scale 0 (all
// codes Q); a block holding inf/NaN sends the canonical NaN (all codes Q)
// and decodes to NaN.
//
// Why the host's arithmetic is the GPU's (docs/codecs.md "Packed codecs"):
// x * e and (k / 2^s) * d~ are products of at most 11 + 11 bits, exact in
// fp32 and fp64; 2^s / e and the fused sum are computed in fp64 and rounded
// to fp16 through fp32, and each of those double roundings is innocuous
// (53 >= 2*24 + 2, 24 >= 2*11 + 2, for quotients of fp16/fp32 numbers);
// the fused sum is exact in fp64 (its addends span at most 51 bits) and is
// rounded to fp16 once, through fp32 rounded to odd: a plain fp32 rounding
// can land on an fp16 midpoint that the exact sum is not on (its addend
// (k / 2^s) * d~ has up to 16 bits, more than an fp16). packed_codec_test.cc checks every one
// of these claims against exact integer arithmetic, exhaustively where the
// domain allows.
//
// Work dtype fp16 only (bf16 reaches these codecs through the cast). All
// functions are pure and thread-safe; values are raw fp16 bits.
#ifndef QR_KERNELS_PACKED_CODEC_H_
#define QR_KERNELS_PACKED_CODEC_H_

#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/types.h"

namespace qr::kernels::packed {

// s of the scale word 2^s / e: 1, 2, 4 for INT3, INT4, INT6.
constexpr int ScaleShift(Codec codec) {
  return codec == Codec::kInt3 ? 1 : codec == Codec::kInt4 ? 2 : 4;
}

// The block maxima whose multiplier e is a normal fp16 value (2^-14 <= e <=
// 65504), so that the GPU's quantize can be one fp16 fma: fp16 bits
// [0x0380, 0x7AFF], [0x0780, 0x7BFF], [0x0FE0, 0x7BFF] for INT3, INT4, INT6
// (packed_codec_test derives them). Other blocks take the GPU's fp32 path,
// which computes the same numbers.
struct AbsmaxRange {
  uint16_t first, last;
};
constexpr AbsmaxRange FastPathAbsmax(Codec codec) {
  return codec == Codec::kInt3   ? AbsmaxRange{0x0380, 0x7AFF}
         : codec == Codec::kInt4 ? AbsmaxRange{0x0780, 0x7BFF}
                                 : AbsmaxRange{0x0FE0, 0x7BFF};
}

// e for a block maximum a (fp16 bits of a positive finite value): exactly
// representable in fp32 (11 significant bits).
float EncodeMultiplier(Codec codec, uint16_t absmax_bits);

// d~ = RN16(2^s / e).
uint16_t ScaleWord(Codec codec, float multiplier);

// u = Q + rint_even(x * e), for |x| <= the block's maximum.
int Quantize(Codec codec, uint16_t x_bits, float multiplier);

// x' = RN16(((u - Q) / 2^s) * d~); the canonical NaN for a NaN scale word.
uint16_t Decode(Codec codec, int code, uint16_t scale_bits);

// y = sat16(RN16(((u1 - Q) / 2^s) * d~1 + x'0)): rank 1's code and scale
// folded into rank 0's decoded value with one rounding, saturating to
// ±65504; NaN if either is NaN.
uint16_t FusedReduce(Codec codec, int code1, uint16_t scale1_bits, uint16_t decoded0_bits);

// One block of n <= 32 fp16 values: its scale word, and its codes into
// codes[0, n) (what the wire carries, before bit packing).
uint16_t EncodeBlock(Codec codec, const uint16_t* x, int n, uint8_t* codes);

// The proven bound on |x' - x| for every |x| <= a of one quantization
// (docs/codecs.md "Packed codecs"):
//   (a / L) (1 + 2^-10) (1 + 2(Q-1) 2^-11 (2 + 2^-11))
//     + ((Q-1) 2^-s (1 + 2^-11) + 1) 2^-25.
double QuantizationErrorBound(Codec codec, double absmax);

}  // namespace qr::kernels::packed

#endif  // QR_KERNELS_PACKED_CODEC_H_
