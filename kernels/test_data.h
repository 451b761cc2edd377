// Random and adversarial 16-bit test data for the codec and two-shot tests
// (testonly). Deterministic for a given seed.
#ifndef QR_KERNELS_TEST_DATA_H_
#define QR_KERNELS_TEST_DATA_H_

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/types.h"

namespace qr::kernels::testing {

// Fills `out` (a multiple of 32 values of `dtype`) block by block with a mix of
// shapes: uniform, Gaussian, one outlier among small values, sparse, constant,
// alternating signs; each block gets a random power-of-two magnitude spanning
// the format's range (fp16: 2^-24..2^15; bf16: 2^-126..2^126), and a few blocks
// use the extremes (±65504 for fp16, subnormals). Every value is clamped to
// [-limit, limit] before rounding (limit <= 0: the format's largest finite
// value), so the data is always finite.
void FillRandomBlocks(DType dtype, std::mt19937_64& rng, double limit, uint16_t* out, int64_t n);

// Uniform values in [-1, 1] (rounded to dtype).
void FillUniform(DType dtype, std::mt19937_64& rng, uint16_t* out, int64_t n);

// The adversarial blocks of issue 3, 32 values each, in `dtype`: all zeros,
// one huge value among tiny ones, max below 1e-4, values at ±max, alternating
// signs, subnormals (and for bf16: values below 2^-100, huge values).
std::vector<std::vector<uint16_t>> AdversarialBlocks(DType dtype);

// What the two-shot path computes, value by value, with the fp32 arithmetic
// (docs/codecs.md section 3) whatever the format: the values every format
// had before the packed arithmetic (issue 18), and still has where
// !UsesPackedArithmetic. Blocks of 32 from the start; work dtype
// WorkDType(dtype, cast); out[0, n) from inputs[r][0, n), r < world_size.
void Fp32TwoShotValues(Codec codec, DType dtype, bool cast, int world_size,
                       const uint16_t* const* inputs, int64_t n, uint16_t* out);

}  // namespace qr::kernels::testing

#endif  // QR_KERNELS_TEST_DATA_H_
