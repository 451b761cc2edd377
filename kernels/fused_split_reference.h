// The row-split form of the fused collective (kernels/fused_split.h) for all
// ranks in one process, built only from the reference's steps: the
// reduce-scatter of whole token rows, the phase-2 round trip of the owner's
// rows (integer codecs), the epilogue on those rows
// (ApplyResidualRmsNorm), and FP all-gathers of residual_out and norm_out.
// It is what the GPU's split form runs, kernel for kernel
// (RankState::LaunchSplitRows), and the test that it equals
// ReferenceAllReduceResidualRmsNorm of the two-shot all-reduce wherever
// SplitRowsExact holds (kernels/fused_split_reference_test.cc) is the proof
// that the GPU's split form gives the specification's bits.
#ifndef QR_KERNELS_FUSED_SPLIT_REFERENCE_H_
#define QR_KERNELS_FUSED_SPLIT_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/two_shot_reference.h"

namespace qr::kernels {

// Phase 2's quantize/dequantize of one rank's chunk of p.num_elems values
// (p.dtype bits), in place: per collective tile, EncodeAllGatherShard then
// DecodeAllGatherShard as source 0 (what a quantized all-gather outputs for
// its own chunk). Codec::kFp leaves the values as they are.
void RoundTripChunk(const TwoShotParams& p, uint16_t* chunk);

// The split form for all ranks: p describes the whole message (num_elems =
// tokens * hidden), as for ReferenceAllReduceResidualRmsNorm, whose buffer
// rules apply (residual[r] may be nullptr on every rank; residual_out[r] may
// equal inputs[r] or residual[r]; norm_out[r] may equal inputs[r]). The
// steps run whatever SplitRowsExact says (the tests compare both ways);
// kInvalidArgument when tokens does not split evenly over the ranks, and
// ValidateTwoShotParams' and ValidateResidualRmsNormShape's errors.
[[nodiscard]] Status ReferenceSplitResidualRmsNorm(
    const TwoShotParams& p, int64_t tokens, int64_t hidden, float eps,
    const uint16_t* const* inputs, const uint16_t* const* residual, const uint16_t* weight,
    uint16_t* const* residual_out, uint16_t* const* norm_out);

}  // namespace qr::kernels

#endif  // QR_KERNELS_FUSED_SPLIT_REFERENCE_H_
