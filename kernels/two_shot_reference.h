// The two-shot all-reduce, written once as rank-local step functions over
// plain memory, plus ReferenceAllReduce() that runs all ranks in one process
// from exactly those steps. The host backend (comm/) runs the same steps over
// shared memory, and the GPU kernels must produce the same bits.
//
// Geometry (tile, shard, slot): kernels/geometry.h. Here, the receive
// buffer of the host reference and backend:
//   slots    each rank's receive buffer has `num_slots` slots per phase; tile t
//            travels through slot t % num_slots. The data from source rank s in
//            phase p (0 = scatter, 1 = gather) sits at RecvOffset(); offsets do
//            not depend on the message size or the codec.
//
// Per tile, rank `me` does (ws = world size):
//   phase 1  for s in 0..ws-1: EncodeInputShard(tile, s) -> rank s's slot,
//            phase 0, source `me`.
//            wait until all ws sources arrived in my phase-0 slot;
//            ReduceShard(the ws encodings in source order 0..ws-1) -> reduced.
//   phase 2  EncodeReducedShard(reduced) -> every rank's slot, phase 1,
//            source `me` (including my own);
//            wait for all ws sources in my phase-1 slot;
//            for s in 0..ws-1: DecodeOutputShard(source s's data, tile, s).
// Every rank decodes the same bytes for every output shard, so outputs are
// bit-identical on all ranks (the owner also decodes its own re-encoding).
//
// All functions are pure except for the memory they write and thread-safe on
// distinct outputs. The step functions never allocate (they work block by
// block, scratch < 1 KiB on the stack); ReferenceAllReduce allocates its
// exchange buffers.
#ifndef QR_KERNELS_TWO_SHOT_REFERENCE_H_
#define QR_KERNELS_TWO_SHOT_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/codec.h"
#include "kernels/geometry.h"
#include "kernels/types.h"

namespace qr::kernels {

// What a call reduces. Trivially copyable; the same on every rank.
struct TwoShotParams {
  int world_size = 2;        // 2, 4 or 8
  Codec codec = Codec::kFp;  // kInt3 only with world_size 2
  DType dtype = DType::kFloat16;
  bool cast_bf16_to_fp16 = false;  // only meaningful for kBFloat16
  int64_t num_elems = 0;           // values per rank; a multiple of 8 (16 bytes)
};

// kInvalidArgument naming the problem: world size not 2/4/8, codec or dtype out
// of range, INT3 with world size != 2, negative num_elems or not a multiple of 8.
[[nodiscard]] Status ValidateTwoShotParams(const TwoShotParams& p);

// Bytes reserved per source rank inside a slot (the FP shard size).
constexpr int64_t SourceStrideBytes(int world_size) { return kTileSlotBytes / world_size; }
constexpr int64_t SlotOfTile(int64_t tile, int64_t num_slots) { return tile % num_slots; }
// Size of one rank's receive buffer: 2 phases x num_slots x 32 KiB.
constexpr int64_t RecvBufferBytes(int64_t num_slots) { return 2 * num_slots * kTileSlotBytes; }
// Byte offset, in the receiver's buffer, of the data sent by `source_rank` in
// `phase` (0 or 1) through `slot`.
constexpr int64_t RecvOffset(int64_t num_slots, int64_t slot, int phase, int source_rank,
                             int world_size) {
  return (phase * num_slots + slot) * kTileSlotBytes + source_rank * SourceStrideBytes(world_size);
}

// Phase 1: encodes shard `shard` of tile `tile` of this rank's `input`
// (p.num_elems values of p.dtype) into ShardWireBytes(p.codec,
// p.world_size) bytes at `wire`, for rank `shard`. Values past num_elems
// encode as +0; bf16 is cast to fp16 (saturating) first when p asks for it.
void EncodeInputShard(const TwoShotParams& p, const uint16_t* input, int64_t tile, int shard,
                      uint8_t* wire);

// Phase 1 reduce: decodes the world_size encodings `received[0..ws-1]`
// (received[s] = what source rank s sent, each ShardWireBytes long) and sums
// them in source order into ShardElems(ws) work-dtype values at `reduced`,
// with the format's arithmetic (docs/codecs.md sections 3 and 9):
//   packed (UsesPackedArithmetic), ws 2: packed::FusedReduce(rank 1's code
//     and scale, rank 0's decoded fp16 value), one saturating rounding;
//   otherwise: an fp32 left fold of the decoded values (acc = v0;
//     acc = acc + v1; ...; for packed formats the fp16 decoded values),
//     rounded once to the work dtype (saturating).
void ReduceShard(const TwoShotParams& p, const uint8_t* const* received, uint16_t* reduced);

// Phase 2: encodes a reduced shard (ShardElems(ws) work-dtype values).
void EncodeReducedShard(const TwoShotParams& p, const uint16_t* reduced, uint8_t* wire);

// Phase 2 gather: decodes shard `shard` of tile `tile` from `wire` (what
// its owner, rank `shard`, sent) and writes its values that lie below
// p.num_elems into `output` (p.dtype): decoded value -> work dtype
// (saturating RNE; packed formats' decoded values are fp16 already) -> bf16
// (RNE) when casting.
void DecodeOutputShard(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int shard,
                       uint16_t* output);

// All ranks in one process: inputs[r] / outputs[r] hold p.num_elems values of
// rank r (outputs[r] may equal inputs[r]). Built only from the step functions
// above, tile by tile. Returns ValidateTwoShotParams' errors.
[[nodiscard]] Status ReferenceAllReduce(const TwoShotParams& p, const uint16_t* const* inputs,
                                        uint16_t* const* outputs);

}  // namespace qr::kernels

#endif  // QR_KERNELS_TWO_SHOT_REFERENCE_H_
