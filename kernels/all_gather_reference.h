// All-gather as the two-shot all-reduce's phase 2: rank-local step functions
// over plain memory plus ReferenceAllGather(), which runs all ranks in one
// process from exactly those steps. The host backend runs the same steps over
// shared memory; GPU kernels must produce the same bits.
//
// A call of per-rank count n = p.num_elems (a multiple of 8 values): rank q's
// input holds n values; every rank's output holds world_size * n values, rank
// q's at [q * n, (q + 1) * n). Shards are laid onto tiles as
// kernels/collective_layout.h says (tile t, shard q = rank q's values
// [t * ShardElems, ...), +0 past n).
//
// Per tile, rank `me` does (the two-shot's phase 2, with its input in place
// of the reduced shard):
//   EncodeAllGatherShard(tile) -> every rank (me included), source me;
//   wait for all ws sources;
//   for q in 0..ws-1: DecodeAllGatherShard(source q's data, tile, q).
// Every rank decodes the same bytes, so outputs are bit-identical on all ranks.
//
// Codec::kFp copies bits exactly (NaN payloads included) and ignores the
// bf16 cast, which would only clip. A quantized codec encodes each value once
// and is lossy: |output - input| <= AllGatherErrorBound (kernels/
// collective_error_bound.h), the all-reduce's phase-2 error. A call the policy
// sends one-shot moves exact values: its bits are those of Codec::kFp
// (AllGatherParamsFor).
#ifndef QR_KERNELS_ALL_GATHER_REFERENCE_H_
#define QR_KERNELS_ALL_GATHER_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/collective_layout.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {

// p for kTwoShot; p with Codec::kFp for kOneShot (exact).
TwoShotParams AllGatherParamsFor(const TwoShotParams& p, Algorithm algorithm);

// The dtype an all-gather's codec works in: p.dtype for kFp (bits copied),
// else WorkDType(p.dtype, p.cast_bf16_to_fp16).
DType AllGatherWorkDType(const TwoShotParams& p);

// Encodes this rank's values [t * ShardElems, (t + 1) * ShardElems) of
// `input` (p.num_elems values of p.dtype; +0 past the end) into
// ShardWireBytes(p.codec, ws) bytes at `wire`: FP as the raw bits, otherwise
// after the saturating bf16 -> fp16 cast when p asks for it.
void EncodeAllGatherShard(const TwoShotParams& p, const uint16_t* input, int64_t tile,
                          uint8_t* wire);

// Decodes what rank `source` sent for tile `tile` into output[source * n +
// t * ShardElems + i] for the values below n: FP copies the bits; otherwise
// decoded value -> work dtype (saturating RNE) -> bf16 (RNE) when casting, as
// DecodeOutputShard does.
void DecodeAllGatherShard(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int source,
                          uint16_t* output);

// All ranks in one process: inputs[r] holds p.num_elems values, outputs[r]
// world_size * p.num_elems (inputs[r] may be outputs[r] + r * p.num_elems,
// the in-place form). Returns ValidateTwoShotParams' errors.
[[nodiscard]] Status ReferenceAllGather(const TwoShotParams& p, const uint16_t* const* inputs,
                                        uint16_t* const* outputs);

}  // namespace qr::kernels

#endif  // QR_KERNELS_ALL_GATHER_REFERENCE_H_
