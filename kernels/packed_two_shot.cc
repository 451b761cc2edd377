#include "kernels/packed_two_shot.h"

#include <algorithm>
#include <cmath>

#include "kernels/float16.h"
#include "kernels/packed_codec.h"

namespace qr::kernels::packed {
namespace {

constexpr int kBlock = 32;
constexpr int kMaxRanks = 8;
constexpr double kU16 = 0x1p-11;  // fp16 unit roundoff
constexpr double kTiny16 = 0x1p-25;
constexpr double kMax16 = 65504.0;
constexpr double kU32 = 0x1p-24;

// Quantizes then decodes one block of fp16 values (what every receiver of it
// sees); codes into codes[], the scale word returned.
uint16_t EncodeDecode(Codec codec, const uint16_t* x, int n, uint16_t* decoded, uint8_t* codes) {
  const uint16_t scale = EncodeBlock(codec, x, n, codes);
  for (int i = 0; i < n; ++i) decoded[i] = Decode(codec, codes[i], scale);
  return scale;
}

}  // namespace

void TwoShotValues(Codec codec, DType dtype, int world_size, const uint16_t* const* inputs,
                   int64_t n, uint16_t* out) {
  const bool cast = dtype == DType::kBFloat16;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int len = static_cast<int>(std::min<int64_t>(kBlock, n - begin));
    uint16_t work[kMaxRanks][kBlock];
    uint8_t codes[kMaxRanks][kBlock];
    uint16_t scales[kMaxRanks];
    uint16_t decoded[kMaxRanks][kBlock];
    for (int r = 0; r < world_size; ++r) {
      for (int i = 0; i < len; ++i) {
        const uint16_t v = inputs[r][begin + i];
        work[r][i] = cast ? BFloat16ToHalf(v) : v;
      }
      scales[r] = EncodeDecode(codec, work[r], len, decoded[r], codes[r]);
    }
    uint16_t reduced[kBlock];
    for (int i = 0; i < len; ++i) {
      if (world_size == 2) {
        reduced[i] = FusedReduce(codec, codes[1][i], scales[1], decoded[0][i]);
      } else {
        float sum = HalfToFloat(decoded[0][i]);
        for (int r = 1; r < world_size; ++r) sum += HalfToFloat(decoded[r][i]);
        reduced[i] = FloatToHalf(sum);  // saturating; NaN stays NaN
      }
    }
    uint16_t result[kBlock];
    uint8_t phase2_codes[kBlock];
    EncodeDecode(codec, reduced, len, result, phase2_codes);
    for (int i = 0; i < len; ++i) out[begin + i] = cast ? HalfToBFloat16(result[i]) : result[i];
  }
}

double TwoShotErrorBound(Codec codec, DType dtype, int world_size, const double* block_absmax,
                         const double* element_abs, double exact_sum) {
  const bool cast = dtype == DType::kBFloat16;
  double total = 0;
  double h_block = 0;  // bound on sum over ranks of |phase-1 decoded|, block-wide
  double h_elem = 0;   // the same for this element
  for (int r = 0; r < world_size; ++r) {
    double a = block_absmax[r], x = element_abs[r];
    if (cast) {  // saturation plus one fp16 rounding of this element
      total += std::max(0.0, x - kMax16) + kU16 * std::min(x, kMax16) + kTiny16;
      a = std::min(kMax16, a * (1 + kU16) + kTiny16);
      x = std::min(kMax16, x * (1 + kU16) + kTiny16);
    }
    // The decoded value's own fp16 rounding is inside the bound.
    const double b = QuantizationErrorBound(codec, a);
    total += b;
    h_block += a + b;
    h_elem += x + b;
  }
  // World size 2: one fused rounding; 4 and 8: fp32 left fold, then one.
  const double gamma = world_size == 2 ? 0.0 : (world_size - 1) * kU32 * 1.01;
  total += gamma * h_elem + kU16 * h_elem * (1 + gamma) + kTiny16;
  const double y_block = std::min(kMax16, h_block * (1 + gamma) * (1 + kU16) + kTiny16);
  const double y_elem = std::min(kMax16, h_elem * (1 + gamma) * (1 + kU16) + kTiny16);
  // Phase 2: one quantization of the reduced block, decoded to fp16.
  const double b2 = QuantizationErrorBound(codec, y_block);
  total += b2;
  if (cast) total += 0x1p-8 * std::min(y_elem + b2, kMax16) + 0x1p-134;
  // Saturation to ±65504 moves the result towards clamp(S): measured from S
  // it adds at most twice the part beyond the range.
  total += 2 * std::max(0.0, std::fabs(exact_sum) - kMax16);
  return total;
}

}  // namespace qr::kernels::packed
