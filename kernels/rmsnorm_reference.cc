#include "kernels/rmsnorm_reference.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "kernels/float16.h"
#include "kernels/float8.h"
#include "kernels/one_shot_reference.h"

namespace qr::kernels {

float RmsNormSumOfSquares(const float* row, int64_t hidden) {
  float lanes[kRmsNormLanes] = {};
  const int64_t chunks = hidden / kRmsNormChunkElems;
  for (int64_t c = 0; c < chunks; ++c) {
    float& p = lanes[c % kRmsNormLanes];
    for (int64_t i = c * kRmsNormChunkElems; i < (c + 1) * kRmsNormChunkElems; ++i) {
      const float square = row[i] * row[i];
      p = p + square;
    }
  }
  for (int s = kRmsNormLanes / 2; s >= 1; s /= 2) {
    for (int j = 0; j < s; ++j) lanes[j] = lanes[j] + lanes[j + s];
  }
  return lanes[0];
}

float RmsNormInverse(float sum_of_squares, int64_t hidden, float eps) {
  // IEEE division and std::sqrt are correctly rounded; the GPU uses
  // __fdiv_rn / __fsqrt_rn for the same bits (never rsqrt approximations).
  const float mean = sum_of_squares / static_cast<float>(hidden);
  const float root = std::sqrt(mean + eps);
  return 1.0f / root;
}

float Fp8InverseScale(float scale) { return 1.0f / scale; }

void ApplyResidualRmsNorm(const ResidualRmsNormRows& rows, int64_t first, int64_t count) {
  const DType d = rows.dtype;
  const size_t hidden = static_cast<size_t>(rows.hidden);
  std::vector<float> x(hidden);
  for (int64_t t = first; t < first + count; ++t) {
    const size_t base = static_cast<size_t>(t) * hidden;
    for (size_t i = 0; i < hidden; ++i) {
      // Read both operands before the write: residual_out may be either one.
      const uint16_t reduced = rows.reduced[base + i];
      uint16_t out = reduced;
      if (rows.residual != nullptr) {
        out = FromFloat(d, ToFloat(d, reduced) + ToFloat(d, rows.residual[base + i]));
      }
      rows.residual_out[base + i] = out;
      x[i] = ToFloat(d, out);
    }
    const float inv =
        RmsNormInverse(RmsNormSumOfSquares(x.data(), rows.hidden), rows.hidden, rows.eps);
    for (size_t i = 0; i < hidden; ++i) {
      const float scaled = x[i] * inv;
      const uint16_t norm = FromFloat(d, scaled * ToFloat(d, rows.weight[i]));
      rows.norm_out[base + i] = norm;
      if (rows.quant_out != nullptr) {
        const float q = ToFloat(d, norm) * rows.quant_inv_scale;
        rows.quant_out[base + i] = E4m3FromFloatBits(FloatBits(q));
      }
    }
  }
}

Status ValidateResidualRmsNormShape(const TwoShotParams& p, int64_t tokens, int64_t hidden) {
  if (tokens < 0 || hidden <= 0 || hidden % kRmsNormChunkElems != 0) {
    return InvalidArgumentError(
        "residual RMSNorm: hidden " + std::to_string(hidden) +
        " must be positive and a multiple of " + std::to_string(kRmsNormChunkElems) +
        " (rows of 16 bytes), tokens " + std::to_string(tokens) + " must not be negative");
  }
  if (tokens * hidden != p.num_elems) {
    return InvalidArgumentError("residual RMSNorm: " + std::to_string(tokens) + " x " +
                                std::to_string(hidden) + " is not the call's " +
                                std::to_string(p.num_elems) + " values");
  }
  return OkStatus();
}

Status ReferenceAllReduceResidualRmsNorm(const TwoShotParams& p, Algorithm algorithm,
                                         int64_t tokens, int64_t hidden, float eps,
                                         const uint16_t* const* inputs,
                                         const uint16_t* const* residual, const uint16_t* weight,
                                         uint16_t* const* residual_out, uint16_t* const* norm_out,
                                         uint8_t* const* quant_out, float quant_scale) {
  QR_RETURN_IF_ERROR(ValidateResidualRmsNormShape(p, tokens, hidden));
  // The all-reduce lands in norm_out (which may be the input), as the
  // backends do it: norm_out is the one output no residual aliases.
  if (algorithm == Algorithm::kOneShot) {
    QR_RETURN_IF_ERROR(ReferenceOneShotAllReduce(p, inputs, norm_out));
  } else {
    QR_RETURN_IF_ERROR(ReferenceAllReduce(p, inputs, norm_out));
  }
  for (int r = 0; r < p.world_size; ++r) {
    // The rows as rank r holds them: the reduced values in norm_out.
    ResidualRmsNormRows rows{p.dtype,     tokens, hidden,          eps,        norm_out[r],
                             residual[r], weight, residual_out[r], norm_out[r]};
    if (quant_out != nullptr) {
      rows.quant_out = quant_out[r];
      rows.quant_inv_scale = Fp8InverseScale(quant_scale);
    }
    ApplyResidualRmsNorm(rows, 0, tokens);
  }
  return OkStatus();
}

}  // namespace qr::kernels
