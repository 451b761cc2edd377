#include "kernels/packed_codec.h"

#include <algorithm>
#include <cmath>

#include "kernels/float16.h"

namespace qr::kernels::packed {
namespace {

bool IsNaNHalf(uint16_t h) { return (h & 0x7FFFu) > kFp16Inf; }

// RN16 of a double in one rounding: the double rounded to fp32 by rounding
// to odd (truncate, then set the last bit if anything was cut off) keeps 24
// >= 11 + 2 bits and the information that the value is not on the fp16
// grid, so FloatToHalf then rounds correctly. For values that are normal in
// fp32 (every value here is 0 or >= 2^-30 in magnitude).
uint16_t DoubleToHalf(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
    f = BitsToFloat(FloatBits(f) | 1u);
  }
  return FloatToHalf(f);
}

// k / 2^s of a code, exact in every format used here.
double CodeValue(Codec codec, int code) {
  return std::ldexp(static_cast<double>(code - Bias(codec)), -ScaleShift(codec));
}

}  // namespace

float EncodeMultiplier(Codec codec, uint16_t absmax_bits) {
  const double a = HalfToFloat(absmax_bits);
  const double k = Bias(codec) - 0.5;
  // K / a truncated to 11 significant bits. The fp64 quotient is within half
  // an fp64 ulp of K / a, so the truncation is the exact one unless the
  // quotient rounded up onto an 11-bit number; e * a (11 x 11 bits, exact)
  // against K settles it, and also excludes e * a == K ("strictly below").
  int exp2 = 0;
  const double fraction = std::frexp(k / a, &exp2);  // in [0.5, 1)
  int64_t significand = static_cast<int64_t>(std::floor(std::ldexp(fraction, 11)));
  if (std::ldexp(static_cast<double>(significand), exp2 - 11) * a >= k) {
    --significand;
    if (significand < 1024) {
      significand = 2047;
      --exp2;
    }
  }
  return static_cast<float>(std::ldexp(static_cast<double>(significand), exp2 - 11));
}

uint16_t ScaleWord(Codec codec, float multiplier) {
  // RN16(RN24(RN53(2^s / e))) = RN16(2^s / e): both double roundings are
  // innocuous; the GPU computes RN16(RN24(...)) the same way.
  return FloatToHalf(static_cast<float>(std::ldexp(1.0, ScaleShift(codec)) / multiplier));
}

int Quantize(Codec codec, uint16_t x_bits, float multiplier) {
  // An 11 x 11-bit product: exact in fp64 (and in fp32). nearbyint rounds
  // half to even in the default rounding mode, as rint_even asks.
  const double product = static_cast<double>(HalfToFloat(x_bits)) * multiplier;
  return Bias(codec) + static_cast<int>(std::nearbyint(product));
}

uint16_t Decode(Codec codec, int code, uint16_t scale_bits) {
  if (IsNaNHalf(scale_bits)) return kFp16CanonicalNaN;
  // Exact in fp64 and in fp32 (at most 5 + 11 bits): FloatToHalf rounds once.
  const double value = CodeValue(codec, code) * HalfToFloat(scale_bits);
  return FloatToHalf(static_cast<float>(value));
}

uint16_t FusedReduce(Codec codec, int code1, uint16_t scale1_bits, uint16_t decoded0_bits) {
  if (IsNaNHalf(scale1_bits) || IsNaNHalf(decoded0_bits)) return kFp16CanonicalNaN;
  // Both addends are multiples of 2^-30 below 2^22 in magnitude, so the fp64
  // sum is exact; DoubleToHalf rounds it once (and saturates), as the GPU's
  // fma.rn.f16x2 does.
  const double sum = CodeValue(codec, code1) * HalfToFloat(scale1_bits) +
                     static_cast<double>(HalfToFloat(decoded0_bits));
  return DoubleToHalf(sum);
}

uint16_t EncodeBlock(Codec codec, const uint16_t* x, int n, uint8_t* codes) {
  uint16_t absmax = 0;
  for (int i = 0; i < n; ++i) absmax = std::max<uint16_t>(absmax, x[i] & 0x7FFFu);
  const uint8_t zero_code = static_cast<uint8_t>(Bias(codec));
  if (absmax >= kFp16Inf || absmax == 0) {
    for (int i = 0; i < n; ++i) codes[i] = zero_code;
    return absmax == 0 ? 0 : kFp16CanonicalNaN;
  }
  const float e = EncodeMultiplier(codec, absmax);
  for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(Quantize(codec, x[i], e));
  return ScaleWord(codec, e);
}

double QuantizationErrorBound(Codec codec, double absmax) {
  const double q = Bias(codec);
  const double levels = 2 * q - 1;
  const double u = std::ldexp(1.0, -11);
  const double relative = (1 + 2 * u) * (1 + 2 * (q - 1) * u * (2 + u));
  const double absolute =
      ((q - 1) * std::ldexp(1.0, -ScaleShift(codec)) * (1 + u) + 1) * std::ldexp(1.0, -25);
  return absmax / levels * relative + absolute;
}

}  // namespace qr::kernels::packed
