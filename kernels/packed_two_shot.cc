#include "kernels/packed_two_shot.h"

#include <algorithm>
#include <cmath>

#include "common/limits.h"
#include "kernels/codec_layout.h"
#include "kernels/error_bound.h"
#include "kernels/float16.h"
#include "kernels/packed_codec.h"

namespace qr::kernels::packed {
namespace {

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
  for (int64_t begin = 0; begin < n; begin += kBlockElems) {
    const int len = static_cast<int>(std::min<int64_t>(kBlockElems, n - begin));
    uint16_t work[kMaxWorldSize][kBlockElems];
    uint8_t codes[kMaxWorldSize][kBlockElems];
    uint16_t scales[kMaxWorldSize];
    uint16_t decoded[kMaxWorldSize][kBlockElems];
    for (int r = 0; r < world_size; ++r) {
      for (int i = 0; i < len; ++i) {
        const uint16_t v = inputs[r][begin + i];
        work[r][i] = cast ? BFloat16ToHalf(v) : v;
      }
      scales[r] = EncodeDecode(codec, work[r], len, decoded[r], codes[r]);
    }
    uint16_t reduced[kBlockElems];
    for (int i = 0; i < len; ++i) {
      if (world_size == 2) {
        reduced[i] = FusedReduce(codec, codes[1][i], scales[1], decoded[0][i]);
      } else {
        float sum = HalfToFloat(decoded[0][i]);
        for (int r = 1; r < world_size; ++r) sum += HalfToFloat(decoded[r][i]);
        reduced[i] = FloatToHalf(sum);  // saturating; NaN stays NaN
      }
    }
    uint16_t result[kBlockElems];
    uint8_t phase2_codes[kBlockElems];
    EncodeDecode(codec, reduced, len, result, phase2_codes);
    for (int i = 0; i < len; ++i) out[begin + i] = cast ? HalfToBFloat16(result[i]) : result[i];
  }
}

double TwoShotErrorBound(Codec codec, DType dtype, int world_size, const double* block_absmax,
                         const double* element_abs, double exact_sum) {
  // The work dtype is fp16, so the shared bound takes the packed arithmetic.
  return kernels::TwoShotErrorBound(codec, dtype, dtype == DType::kBFloat16, world_size,
                                    block_absmax, element_abs, exact_sum);
}

}  // namespace qr::kernels::packed
