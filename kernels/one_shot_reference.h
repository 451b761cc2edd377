// The one-shot all-reduce for small messages, as rank-local step functions
// over plain memory plus ReferenceOneShotAllReduce() that runs all ranks in
// one process. The host backend runs the same steps over shared memory and
// the GPU one-shot kernel must produce the same bits (docs/codecs.md
// "One-shot").
//
// Every rank pushes its whole input, as exact values of its dtype, to every
// peer; each rank sums all world_size inputs in fp32 in rank order 0..ws-1 and
// rounds once. That is exactly what the two-shot FP path computes (its second
// encoding is lossless), so for every input, NaN and inf included, the
// one-shot output equals ReferenceAllReduce with Codec::kFp and the cast off
// bit for bit, whatever codec the call names: one-shot never quantizes, and
// its error is the FP bound. cast_bf16_to_fp16 is ignored too: the cast
// exists to give quantized codecs fp16's finer grid; with exact values it
// would only add a rounding, fp16's range limit and conversion time.
//
// Wire form (so that zeroed memory means "nothing arrived yet", which lets a
// GPU receiver poll the data itself instead of a flag): a value travels as
// the bitwise NOT of its 16 bits, after 0xFFFF (a NaN) is replaced by
// 0xFFFE (also a NaN, and NaN sums come out as the canonical NaN either way).
// A wire value is therefore never 0.
//
// Geometry (kernels/geometry.h): a rank's receive region holds world_size
// sources of up to OneShotMaxElems(ws) values each, per phase (calls
// alternate between two phases), kOneShotRegionBytes per phase whatever the
// world size.
#ifndef QR_KERNELS_ONE_SHOT_REFERENCE_H_
#define QR_KERNELS_ONE_SHOT_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/geometry.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {

// ValidateTwoShotParams' checks (the codec is checked but not used) plus
// num_elems <= OneShotMaxElems(world_size).
[[nodiscard]] Status ValidateOneShotParams(const TwoShotParams& p);

// The wire form of one input value (p.dtype bits): 0xFFFF -> 0xFFFE, then
// bitwise NOT. Never 0.
uint16_t OneShotWireValue(const TwoShotParams& p, uint16_t input);

// Writes the wire form of input[0..n) to wire[0..n).
void EncodeOneShot(const TwoShotParams& p, const uint16_t* input, int64_t n, uint16_t* wire);

// received[s] = the n wire values source rank s sent (s = 0..ws-1, this rank's
// own included). Sums them in fp32 in source order (acc = v0; acc = acc + v1;
// ...), rounds once to p.dtype (saturating RNE) and writes n values to output.
void ReduceOneShot(const TwoShotParams& p, const uint16_t* const* received, int64_t n,
                   uint16_t* output);

// All ranks in one process, built only from the two steps above (outputs[r]
// may equal inputs[r]). Returns ValidateOneShotParams' errors.
[[nodiscard]] Status ReferenceOneShotAllReduce(const TwoShotParams& p,
                                               const uint16_t* const* inputs,
                                               uint16_t* const* outputs);

}  // namespace qr::kernels

#endif  // QR_KERNELS_ONE_SHOT_REFERENCE_H_
