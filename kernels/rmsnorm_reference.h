// The residual add and RMSNorm that follow an all-reduce in
// qr_all_reduce_residual_rmsnorm (Collective::kAllReduceResidualRmsNorm), as
// the specification every backend reproduces bit for bit (docs/fused.md):
//
//   reduced      = the all-reduce's output, exactly the bits the same
//                  all-reduce call returns (same policy, one-shot or
//                  two-shot, codec, cast), in dtype;
//   residual_out = round(float(reduced) + float(residual))  per element, one
//                  fp32 add rounded once to dtype (saturating RNE); with no
//                  residual, residual_out = reduced (the same bits);
//   norm_out     = round((float(residual_out) * inv) * float(weight))  per
//                  element, two fp32 multiplies in that order, rounded once,
//   inv          = 1 / sqrt(sum / float(hidden) + eps)  per row, fp32 with
//                  correctly rounded division and square root,
//   sum          = RmsNormSumOfSquares(the row of residual_out),
//   quant_out    = e4m3(float(norm_out) * inv_scale)  per element, only
//                  when asked for (the FP8 output): inv_scale = 1 / scale,
//                  fp32, correctly rounded, e4m3 as kernels/float8.h rounds.
//
// The epilogue starts from the all-reduce's dtype-rounded result, not from
// an fp32 sum, because only that value exists on every rank in both forms:
// two-shot's quantized second hop delivers decoded values, and every rank
// must produce the same residual_out. The sum of squares has one fixed
// order (RmsNormSumOfSquares) so that a GPU block reproduces it.
//
// Pure functions of their arguments, thread-safe on distinct outputs.
#ifndef QR_KERNELS_RMSNORM_REFERENCE_H_
#define QR_KERNELS_RMSNORM_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/rmsnorm_lanes.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {

// sum(x[i]^2) over a row of `hidden` fp32 values (hidden a multiple of
// kRmsNormChunkElems) in this order, every operation fp32 rounded on its own
// (no fused multiply-add):
//   lane j: p[j] = 0; for its chunks in increasing c, for i in the chunk in
//           increasing order: p[j] = p[j] + x[i] * x[i];
//   tree:   for s = 128, 64, ..., 1: p[j] = p[j] + p[j + s] for j < s;
//   result: p[0].
float RmsNormSumOfSquares(const float* row, int64_t hidden);

// 1 / sqrt(sum_of_squares / float(hidden) + eps), fp32, correctly rounded
// division and square root.
float RmsNormInverse(float sum_of_squares, int64_t hidden, float eps);

// What one rank's epilogue reads and writes (host memory, dtype bits).
// residual_out may equal reduced or residual (element by element in place);
// norm_out may equal reduced; nothing else overlaps.
struct ResidualRmsNormRows {
  DType dtype = DType::kFloat16;
  int64_t tokens = 0;
  int64_t hidden = 0;  // a multiple of kRmsNormChunkElems
  float eps = 0;
  const uint16_t* reduced = nullptr;   // tokens x hidden
  const uint16_t* residual = nullptr;  // tokens x hidden, or nullptr: none
  const uint16_t* weight = nullptr;    // hidden
  uint16_t* residual_out = nullptr;    // tokens x hidden
  uint16_t* norm_out = nullptr;        // tokens x hidden
  uint8_t* quant_out = nullptr;        // tokens x hidden, or nullptr: no FP8 output
  float quant_inv_scale = 0;           // Fp8InverseScale(scale), with quant_out
};

// 1 / scale, fp32, correctly rounded: the FP8 output's multiplier.
float Fp8InverseScale(float scale);

// Applies the epilogue of the file comment to rows [first, first + count).
void ApplyResidualRmsNorm(const ResidualRmsNormRows& rows, int64_t first, int64_t count);

// kInvalidArgument unless tokens >= 0, hidden > 0 and a multiple of
// kRmsNormChunkElems, and tokens * hidden == p.num_elems.
[[nodiscard]] Status ValidateResidualRmsNormShape(const TwoShotParams& p, int64_t tokens,
                                                  int64_t hidden);

// The whole collective for all ranks in one process: the all-reduce of
// `algorithm` (ReferenceOneShotAllReduce or ReferenceAllReduce with p), then
// the epilogue on every rank. residual[r] may be nullptr (no residual, on
// every rank alike), residual_out[r] may equal inputs[r] or residual[r],
// norm_out[r] may equal inputs[r]. quant_out (the FP8 output with
// quant_scale) may be nullptr, or quant_out[r] a buffer of tokens x hidden
// bytes apart from the rest. Returns the all-reduce's and
// ValidateResidualRmsNormShape's errors.
[[nodiscard]] Status ReferenceAllReduceResidualRmsNorm(
    const TwoShotParams& p, Algorithm algorithm, int64_t tokens, int64_t hidden, float eps,
    const uint16_t* const* inputs, const uint16_t* const* residual, const uint16_t* weight,
    uint16_t* const* residual_out, uint16_t* const* norm_out, uint8_t* const* quant_out = nullptr,
    float quant_scale = 1.0f);

}  // namespace qr::kernels

#endif  // QR_KERNELS_RMSNORM_REFERENCE_H_
