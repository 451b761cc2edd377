// Worst-case per-element error bounds of reduce-scatter and all-gather
// (docs/collectives.md "Error bounds"), the two halves of the two-shot bound
// (kernels/error_bound.h, docs/codecs.md "Error bounds"):
//   reduce-scatter  the phase-1 part: the cast, one quantization per rank,
//                   the fp32 sum in rank order and its one rounding, the cast
//                   back; no phase-2 quantization (there is none);
//   all-gather      one quantization of the value itself (with the cast and
//                   the cast back); 0 for Codec::kFp, which copies bits.
// Pure and thread-safe. Finite inputs; a block with inf/NaN has no bound.
#ifndef QR_KERNELS_COLLECTIVE_ERROR_BOUND_H_
#define QR_KERNELS_COLLECTIVE_ERROR_BOUND_H_

#include <cstdint>

#include "kernels/error_bound.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {

// |output - exact_sum| of one reduce-scatter element; the arguments as for
// TwoShotErrorBound, with each rank's block being the element's shard block
// (32 consecutive values of its chunk, aligned to 32 from the chunk's start).
double ReduceScatterErrorBound(Codec codec, DType dtype, bool cast_bf16_to_fp16, int world_size,
                               const double* block_absmax, const double* element_abs,
                               double exact_sum);

// |output - input| of one all-gather element whose block (32 values of the
// sender's input, aligned to 32 from its start) has largest magnitude
// `block_absmax`.
double AllGatherErrorBound(Codec codec, DType dtype, bool cast_bf16_to_fp16, double block_absmax,
                           double element_abs);

// Checks rank `rank`'s reduce-scatter output (p.num_elems values) given every
// rank's input (world_size * p.num_elems values each).
BoundCheck CheckReduceScatterOutput(const TwoShotParams& p, const uint16_t* const* inputs, int rank,
                                    const uint16_t* output);

// Checks an all-gather output (world_size * p.num_elems values) given every
// rank's input (p.num_elems values each). Index i of the check is the
// output's.
BoundCheck CheckAllGatherOutput(const TwoShotParams& p, const uint16_t* const* inputs,
                                const uint16_t* output);

}  // namespace qr::kernels

#endif  // QR_KERNELS_COLLECTIVE_ERROR_BOUND_H_
