// Reduce-scatter as the two-shot all-reduce's phase 1: rank-local step
// functions over plain memory plus ReferenceReduceScatter(), which runs all
// ranks in one process from exactly those steps. The host backend runs the
// same steps over shared memory; GPU kernels must produce the same bits.
//
// A call of per-rank count n = p.num_elems (a multiple of 8 values): every
// rank's input holds world_size * n values; rank r's output is the n values
// [r * n, (r + 1) * n) of the sum. Shards are laid onto tiles as
// kernels/collective_layout.h says (tile t, shard s = the input's values
// [s * n + t * ShardElems, ...), +0 past s * n + n).
//
// Per tile, rank `me` does (the two-shot's phase 1, unchanged):
//   for s in 0..ws-1: EncodeReduceScatterShard(tile, s) -> rank s, source me;
//   wait for all ws sources; ReduceShard (kernels/two_shot_reference.h: decode,
//   sum in source order 0..ws-1, round once to the work dtype);
//   WriteReduceScatterShard(reduced) -> my output.
// So the output is exactly the reduced shard the all-reduce would re-encode
// for its phase 2: no second quantization. With Codec::kFp every value is the
// fp32 sum of the exact inputs in rank order, rounded once (after the
// saturating bf16 -> fp16 cast when p asks for it), which is what the
// all-reduce returns for the same element.
//
// A call the policy sends one-shot (small messages) moves exact values and
// sums them the same way: its bits are ReferenceReduceScatter of
// ReduceScatterParamsFor(p, kOneShot) (codec FP, cast off), as for the
// all-reduce (kernels/one_shot_reference.h).
#ifndef QR_KERNELS_REDUCE_SCATTER_REFERENCE_H_
#define QR_KERNELS_REDUCE_SCATTER_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/collective_layout.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {

// The parameters whose two-shot steps give the bits of a call of `algorithm`:
// p itself for kTwoShot, p with Codec::kFp and the cast off for kOneShot.
TwoShotParams ReduceScatterParamsFor(const TwoShotParams& p, Algorithm algorithm);

// Encodes shard `shard` of tile `tile` of this rank's `input` (world_size *
// p.num_elems values of p.dtype) into ShardWireBytes(p.codec, ws) bytes at
// `wire`, for rank `shard`: values past the chunk encode as +0; bf16 is cast
// to fp16 (saturating) first when p asks for it.
void EncodeReduceScatterShard(const TwoShotParams& p, const uint16_t* input, int64_t tile,
                              int shard, uint8_t* wire);

// Writes a reduced shard (ShardElems(ws) work-dtype values from ReduceShard)
// of tile `tile` to `output` (p.num_elems values of p.dtype): the values that
// lie below p.num_elems, cast back to bf16 (RNE) when casting.
void WriteReduceScatterShard(const TwoShotParams& p, const uint16_t* reduced, int64_t tile,
                             uint16_t* output);

// All ranks in one process: inputs[r] holds world_size * p.num_elems values,
// outputs[r] p.num_elems (outputs[r] may be inputs[r] + r * p.num_elems, the
// in-place form). Built only from the steps above and ReduceShard. Returns
// ValidateTwoShotParams' errors.
[[nodiscard]] Status ReferenceReduceScatter(const TwoShotParams& p, const uint16_t* const* inputs,
                                            uint16_t* const* outputs);

}  // namespace qr::kernels

#endif  // QR_KERNELS_REDUCE_SCATTER_REFERENCE_H_
