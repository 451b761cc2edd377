#include "kernels/error_bound.h"

#include <algorithm>
#include <cmath>

#include "kernels/codec.h"
#include "kernels/float16.h"
#include "kernels/packed_codec.h"
#include "kernels/rounding_model.h"

namespace qr::kernels {
namespace {

using rounding::Format;
using rounding::FormatOf;
using rounding::kBf16Format;
using rounding::kFp16Format;
using rounding::kU32;

}  // namespace

double QuantizationErrorBound(Codec codec, double block_absmax) {
  if (codec == Codec::kFp) return 0.0;
  const double levels = 2.0 * CodeBias(codec) - 1.0;
  return std::max(block_absmax / levels * (1.0 + 0x1p-12),
                  std::min(block_absmax, static_cast<double>(kNegligibleAbsmax)));
}

double QuantizationErrorBoundOf(Codec codec, DType work, double block_absmax) {
  return TwoShotArithmeticOf(codec, work).quantization_bound(codec, block_absmax);
}

TwoShotArithmetic TwoShotArithmeticOf(Codec codec, DType work) {
  TwoShotArithmetic arith;
  if (UsesPackedArithmetic(codec, work)) {
    arith.quantization_bound = packed::QuantizationErrorBound;
    arith.decode_rounded = true;
    arith.fused_pair = true;
  }
  return arith;
}

double TwoShotErrorBound(Codec codec, DType dtype, bool cast_bf16_to_fp16, int world_size,
                         const double* block_absmax, const double* element_abs, double exact_sum) {
  return TwoShotErrorBound(TwoShotArithmeticOf(codec, WorkDType(dtype, cast_bf16_to_fp16)), codec,
                           dtype, cast_bf16_to_fp16, world_size, block_absmax, element_abs,
                           exact_sum);
}

double TwoShotErrorBound(const TwoShotArithmetic& arith, Codec codec, DType dtype,
                         bool cast_bf16_to_fp16, int world_size, const double* block_absmax,
                         const double* element_abs, double exact_sum) {
  const DType work = WorkDType(dtype, cast_bf16_to_fp16);
  const bool cast = work != dtype;
  const Format& w = FormatOf(work);
  double total = 0.0;
  double h_block = 0.0;  // bound on |phase-1 decoded| summed over ranks, block-wide
  double h_elem = 0.0;   // the same for this element
  for (int r = 0; r < world_size; ++r) {
    double a = block_absmax[r];
    double x = element_abs[r];
    if (cast) {
      // Saturation plus one fp16 rounding of this element.
      total += std::max(0.0, x - kFp16Format.max) + kFp16Format.rel * std::min(x, kFp16Format.max) +
               kFp16Format.abs;
      a = std::min(kFp16Format.max, a * (1.0 + kFp16Format.rel) + kFp16Format.abs);
      x = std::min(kFp16Format.max, x * (1.0 + kFp16Format.rel) + kFp16Format.abs);
    }
    const double b = arith.quantization_bound(codec, a);
    total += b;
    h_block += a + b;
    h_elem += x + b;
  }
  // Recursive fp32 summation of ws terms (none for a fused pair), then one
  // rounding to the work dtype.
  const double gamma = arith.fused_pair && world_size == 2 ? 0.0 : (world_size - 1) * kU32 * 1.01;
  total += gamma * h_elem;
  total += w.rel * h_elem * (1.0 + gamma) + w.abs;
  double y_block = h_block * (1.0 + gamma) * (1.0 + w.rel) + w.abs;
  double y_elem = h_elem * (1.0 + gamma) * (1.0 + w.rel) + w.abs;
  if (work == DType::kFloat16) {
    y_block = std::min(y_block, w.max);
    y_elem = std::min(y_elem, w.max);
  }
  // Phase 2: quantize the reduced block, decode, round to the work dtype
  // (unless the quantization bound already holds that rounding).
  const double b2 = arith.quantization_bound(codec, y_block);
  total += b2;
  double out_mag = y_elem;
  if (arith.decode_rounded) {
    out_mag = y_elem + b2;
  } else if (codec != Codec::kFp) {
    total += w.rel * (y_elem + b2) + w.abs;
    out_mag = (y_elem + b2) * (1.0 + w.rel) + w.abs;
  }
  if (cast) {
    total += kBf16Format.rel * std::min(out_mag, kFp16Format.max) + kBf16Format.abs;
  }
  // Clamping to the fp16 range costs at most twice the part of the sum beyond it.
  if (work == DType::kFloat16) total += 2.0 * std::max(0.0, std::fabs(exact_sum) - w.max);
  return total;
}

namespace {

// Calls visit(i, bound, exact_sum) for every element whose block is finite in
// every rank, and skip(begin, end) for each block that holds inf/NaN.
template <typename Visit, typename Skip>
void ForEachElementBound(const TwoShotParams& p, const uint16_t* const* inputs, Visit visit,
                         Skip skip) {
  const int ws = p.world_size;
  double block_absmax[kMaxWorldSize];
  double element_abs[kMaxWorldSize];
  for (int64_t block = 0; block * kBlockElems < p.num_elems; ++block) {
    const int64_t begin = block * kBlockElems;
    const int64_t end = std::min<int64_t>(begin + kBlockElems, p.num_elems);
    bool finite = true;
    for (int r = 0; r < ws; ++r) {
      block_absmax[r] = 0.0;
      for (int64_t i = begin; i < end; ++i) {
        const double v = ToFloat(p.dtype, inputs[r][i]);
        if (!std::isfinite(v)) finite = false;
        block_absmax[r] = std::max(block_absmax[r], std::fabs(v));
      }
    }
    if (!finite) {
      skip(begin, end);
      continue;
    }
    for (int64_t i = begin; i < end; ++i) {
      double exact = 0.0;
      for (int r = 0; r < ws; ++r) {
        const double v = ToFloat(p.dtype, inputs[r][i]);
        exact += v;
        element_abs[r] = std::fabs(v);
      }
      visit(i,
            TwoShotErrorBound(p.codec, p.dtype, p.cast_bf16_to_fp16, ws, block_absmax, element_abs,
                              exact),
            exact);
    }
  }
}

}  // namespace

BoundCheck CheckTwoShotOutput(const TwoShotParams& p, const uint16_t* const* inputs,
                              const uint16_t* output) {
  BoundCheck check;
  ForEachElementBound(
      p, inputs,
      [&](int64_t i, double bound, double exact) {
        const double out = ToFloat(p.dtype, output[i]);
        const double err = std::isfinite(out) ? std::fabs(out - exact) : INFINITY;
        const double ratio = err == 0.0 ? 0.0 : err / bound;
        check.sum_error += err;
        if (err > bound) ++check.violations;
        if (err > check.max_error) check.max_error = err;
        if (ratio > check.max_ratio || check.worst_index < 0) {
          check.max_ratio = ratio;
          check.worst_index = i;
        }
      },
      [&](int64_t begin, int64_t end) { check.skipped += end - begin; });
  return check;
}

void TwoShotErrorBounds(const TwoShotParams& p, const uint16_t* const* inputs, double* bounds) {
  ForEachElementBound(
      p, inputs, [&](int64_t i, double bound, double) { bounds[i] = bound; },
      [&](int64_t begin, int64_t end) { std::fill(bounds + begin, bounds + end, NAN); });
}

}  // namespace qr::kernels
