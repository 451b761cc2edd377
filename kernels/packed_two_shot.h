// What the two-shot all-reduce computes, value by value, when INT3/INT4/INT6
// use the packed-fp16 arithmetic (kernels/packed_codec.h), and its proven
// per-element error bound (docs/codecs.md section 9.5). The values do not
// depend on the wire layout, only on the blocks of 32 (aligned to the start
// of the message), so this is the oracle the packed two-shot reference and
// kernels must equal once they adopt the arithmetic (issue 18).
//
// Per block, phase 1 quantizes every rank's input; the owner decodes them
// and sums in rank order: at world size 2 with one fused rounding
// (packed::FusedReduce), at 4 and 8 in fp32 (left fold) rounded once to fp16,
// saturating. Phase 2 quantizes the reduced block and every rank decodes it.
// bf16 runs with the cast (saturating to fp16, back to bf16 at the end).
// Pure functions, thread-safe.
#ifndef QR_KERNELS_PACKED_TWO_SHOT_H_
#define QR_KERNELS_PACKED_TWO_SHOT_H_

#include <cstdint>

#include "kernels/types.h"

namespace qr::kernels::packed {

// out[0, n) from inputs[r][0, n), r < world_size (2, 4, 8; INT3: 2). dtype
// kFloat16, or kBFloat16 cast to fp16 on the way in and back on the way out.
void TwoShotValues(Codec codec, DType dtype, int world_size, const uint16_t* const* inputs,
                   int64_t n, uint16_t* out);

// The bound on |out - exact sum| for one element, with the arguments of
// kernels/error_bound.h's TwoShotErrorBound (inputs in dtype units, before
// the cast): block_absmax[r] and element_abs[r] of each rank, the exact sum.
double TwoShotErrorBound(Codec codec, DType dtype, int world_size, const double* block_absmax,
                         const double* element_abs, double exact_sum);

}  // namespace qr::kernels::packed

#endif  // QR_KERNELS_PACKED_TWO_SHOT_H_
