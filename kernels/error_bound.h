// Proven worst-case per-element error bounds of the codecs and of the whole
// two-shot path (derivations in docs/codecs.md "Error bounds"). Tests, the demo
// and the GPU tests assert THESE bounds instead of ad-hoc tolerances.
//
// All functions are pure and thread-safe. They assume finite inputs; an
// element whose block holds inf/NaN has no bound (see docs/codecs.md).
#ifndef QR_KERNELS_ERROR_BOUND_H_
#define QR_KERNELS_ERROR_BOUND_H_

#include <cstdint>

#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {

// One quantization: |decoded - x| for every x of a block of work-dtype values
// whose largest magnitude is `block_absmax`. 0 for kFp; for the integer codecs
// max(a/(2Q-1) * (1 + 2^-12), min(a, 2^-100)).
double QuantizationErrorBound(Codec codec, double block_absmax);

// One quantization with the arithmetic of the format (docs/codecs.md
// sections 5.1 and 9.3): packed::QuantizationErrorBound where
// UsesPackedArithmetic(codec, work) (it holds the decoded value's fp16
// rounding), else QuantizationErrorBound above.
double QuantizationErrorBoundOf(Codec codec, DType work, double block_absmax);

// The two-shot path for one element: |output - exact_sum| where
//   exact_sum       = sum over ranks of the element's input values (exact);
//   block_absmax[r] = largest magnitude in rank r's input over the element's
//                     block of 32 (aligned to 32 values from the start);
//   element_abs[r]  = |rank r's input value of the element|.
// Inputs are in p.dtype units (before any cast). Valid whenever the fp32 sums
// do not overflow (always for fp16 data; |sum| < 3.4e38 for bf16). The
// format's arithmetic is TwoShotArithmeticOf(codec, work dtype): this is the
// bound of every call of that format.
double TwoShotErrorBound(Codec codec, DType dtype, bool cast_bf16_to_fp16, int world_size,
                         const double* block_absmax, const double* element_abs, double exact_sum);

// What the two-shot bound needs to know of a codec's arithmetic: the bound
// of one quantization, whether that bound already holds the decoded value's
// rounding to the work dtype, and whether world size 2 sums its pair with one
// fused rounding instead of an fp32 add. The default is the fp32 arithmetic
// (docs/codecs.md section 3).
struct TwoShotArithmetic {
  double (*quantization_bound)(Codec codec, double block_absmax) = QuantizationErrorBound;
  bool decode_rounded = false;
  bool fused_pair = false;
};
// The arithmetic a format computes with: the packed one (packed::
// QuantizationErrorBound, decode rounded, fused pair at world size 2) where
// UsesPackedArithmetic(codec, work), else the fp32 one.
TwoShotArithmetic TwoShotArithmeticOf(Codec codec, DType work);
double TwoShotErrorBound(const TwoShotArithmetic& arith, Codec codec, DType dtype,
                         bool cast_bf16_to_fp16, int world_size, const double* block_absmax,
                         const double* element_abs, double exact_sum);

// Result of checking a whole all-reduce output against the bound.
struct BoundCheck {
  double max_error = 0;      // max |output - exact_sum|
  double max_ratio = 0;      // max |output - exact_sum| / bound (0/0 counts 0)
  int64_t worst_index = -1;  // element with max_ratio
  int64_t violations = 0;    // elements with error > bound
  int64_t skipped = 0;       // elements whose block holds inf/NaN in some rank
  double sum_error = 0;      // sum of |output - exact_sum| (for mean errors)
};

// Checks `output` (p.num_elems values of p.dtype) against the bound for every
// element, given the ranks' inputs.
BoundCheck CheckTwoShotOutput(const TwoShotParams& p, const uint16_t* const* inputs,
                              const uint16_t* output);

// The bound of every element (TwoShotErrorBound) into bounds[0, p.num_elems);
// NaN for the elements of blocks that hold inf/NaN in some rank.
void TwoShotErrorBounds(const TwoShotParams& p, const uint16_t* const* inputs, double* bounds);

}  // namespace qr::kernels

#endif  // QR_KERNELS_ERROR_BOUND_H_
