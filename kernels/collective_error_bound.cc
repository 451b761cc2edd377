#include "kernels/collective_error_bound.h"

#include <algorithm>
#include <cmath>

#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/rounding_model.h"

namespace qr::kernels {
namespace {

using rounding::Format;
using rounding::FormatOf;
using rounding::kBf16Format;
using rounding::kFp16Format;
using rounding::kU32;

// The saturating bf16 -> fp16 cast of one value of magnitude x: its error,
// and the largest magnitude it can give (into *cast).
double CastError(double x, double* cast) {
  *cast = std::min(kFp16Format.max, x * (1.0 + kFp16Format.rel) + kFp16Format.abs);
  return std::max(0.0, x - kFp16Format.max) + kFp16Format.rel * std::min(x, kFp16Format.max) +
         kFp16Format.abs;
}

void Record(BoundCheck& check, int64_t i, double out, double exact, double bound) {
  const double err = std::isfinite(out) ? std::fabs(out - exact) : INFINITY;
  const double ratio = err == 0.0 ? 0.0 : err / bound;
  check.sum_error += err;
  if (err > bound) ++check.violations;
  if (err > check.max_error) check.max_error = err;
  if (ratio > check.max_ratio || check.worst_index < 0) {
    check.max_ratio = ratio;
    check.worst_index = i;
  }
}

}  // namespace

double ReduceScatterErrorBound(Codec codec, DType dtype, bool cast_bf16_to_fp16, int world_size,
                               const double* block_absmax, const double* element_abs,
                               double exact_sum) {
  const DType work = WorkDType(dtype, cast_bf16_to_fp16);
  const bool cast = work != dtype;
  const Format& w = FormatOf(work);
  const TwoShotArithmetic arith = TwoShotArithmeticOf(codec, work);
  double total = 0.0;
  double h_elem = 0.0;  // bound on the element's decoded values, summed over ranks
  for (int r = 0; r < world_size; ++r) {
    double a = block_absmax[r];
    double x = element_abs[r];
    if (cast) {
      total += CastError(x, &x);
      CastError(a, &a);
    }
    const double b = arith.quantization_bound(codec, a);
    total += b;
    h_elem += x + b;
  }
  const double gamma = arith.fused_pair && world_size == 2 ? 0.0 : (world_size - 1) * kU32 * 1.01;
  total += gamma * h_elem;
  total += w.rel * h_elem * (1.0 + gamma) + w.abs;
  double y_elem = h_elem * (1.0 + gamma) * (1.0 + w.rel) + w.abs;
  if (work == DType::kFloat16) y_elem = std::min(y_elem, w.max);
  if (cast) total += kBf16Format.rel * std::min(y_elem, kFp16Format.max) + kBf16Format.abs;
  // Clamping to the fp16 range costs at most twice the part of the sum beyond it.
  if (work == DType::kFloat16) total += 2.0 * std::max(0.0, std::fabs(exact_sum) - w.max);
  return total;
}

double AllGatherErrorBound(Codec codec, DType dtype, bool cast_bf16_to_fp16, double block_absmax,
                           double element_abs) {
  if (codec == Codec::kFp) return 0.0;
  const DType work = WorkDType(dtype, cast_bf16_to_fp16);
  const bool cast = work != dtype;
  const Format& w = FormatOf(work);
  const TwoShotArithmetic arith = TwoShotArithmeticOf(codec, work);
  double total = 0.0;
  double a = block_absmax;
  double x = element_abs;
  if (cast) {
    total += CastError(x, &x);
    CastError(a, &a);
  }
  const double b = arith.quantization_bound(codec, a);
  total += b;
  double out_mag = x + b;
  if (!arith.decode_rounded) {
    total += w.rel * (x + b) + w.abs;
    out_mag = (x + b) * (1.0 + w.rel) + w.abs;
  }
  if (cast) total += kBf16Format.rel * std::min(out_mag, kFp16Format.max) + kBf16Format.abs;
  return total;
}

BoundCheck CheckReduceScatterOutput(const TwoShotParams& p, const uint16_t* const* inputs, int rank,
                                    const uint16_t* output) {
  BoundCheck check;
  const int ws = p.world_size;
  const int64_t n = p.num_elems;
  double block_absmax[kMaxWorldSize];
  double element_abs[kMaxWorldSize];
  for (int64_t begin = 0; begin < n; begin += kBlockElems) {
    const int64_t end = std::min<int64_t>(begin + kBlockElems, n);
    bool finite = true;
    for (int r = 0; r < ws; ++r) {
      const uint16_t* chunk = inputs[r] + int64_t{rank} * n;
      block_absmax[r] = 0.0;
      for (int64_t i = begin; i < end; ++i) {
        const double v = ToFloat(p.dtype, chunk[i]);
        if (!std::isfinite(v)) finite = false;
        block_absmax[r] = std::max(block_absmax[r], std::fabs(v));
      }
    }
    if (!finite) {
      check.skipped += end - begin;
      continue;
    }
    for (int64_t i = begin; i < end; ++i) {
      double exact = 0.0;
      for (int r = 0; r < ws; ++r) {
        const double v = ToFloat(p.dtype, inputs[r][int64_t{rank} * n + i]);
        exact += v;
        element_abs[r] = std::fabs(v);
      }
      const double bound = ReduceScatterErrorBound(p.codec, p.dtype, p.cast_bf16_to_fp16, ws,
                                                   block_absmax, element_abs, exact);
      Record(check, i, ToFloat(p.dtype, output[i]), exact, bound);
    }
  }
  return check;
}

BoundCheck CheckAllGatherOutput(const TwoShotParams& p, const uint16_t* const* inputs,
                                const uint16_t* output) {
  BoundCheck check;
  const int64_t n = p.num_elems;
  for (int q = 0; q < p.world_size; ++q) {
    for (int64_t begin = 0; begin < n; begin += kBlockElems) {
      const int64_t end = std::min<int64_t>(begin + kBlockElems, n);
      double absmax = 0.0;
      bool finite = true;
      for (int64_t i = begin; i < end; ++i) {
        const double v = ToFloat(p.dtype, inputs[q][i]);
        if (!std::isfinite(v)) finite = false;
        absmax = std::max(absmax, std::fabs(v));
      }
      if (!finite) {
        check.skipped += end - begin;
        continue;
      }
      for (int64_t i = begin; i < end; ++i) {
        const double v = ToFloat(p.dtype, inputs[q][i]);
        const double bound =
            AllGatherErrorBound(p.codec, p.dtype, p.cast_bf16_to_fp16, absmax, std::fabs(v));
        Record(check, int64_t{q} * n + i, ToFloat(p.dtype, output[int64_t{q} * n + i]), v, bound);
      }
    }
  }
  return check;
}

}  // namespace qr::kernels
