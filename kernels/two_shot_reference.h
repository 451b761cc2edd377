// The two-shot all-reduce, written once as rank-local step functions over
// plain memory, plus ReferenceAllReduce() that runs all ranks in one process
// from exactly those steps. The host backend (comm/) runs the same steps over
// shared memory, and the GPU kernels must produce the same bits.
//
// Geometry (fixed; docs/codecs.md "Two-shot"):
//   tile     16384 values (32 KiB of 16-bit data). A call of n values has
//            NumTiles(n) tiles; the last one may be partial: its missing values
//            are taken as +0 for encoding and are never written to the output.
//   segment  a tile splits into world_size contiguous segments of
//            SegmentElems(ws) = 16384/ws values; rank r owns segment r of
//            every tile. A segment is 8/ws atom rows (see kernels/codec.h), so
//            its wire size is SegmentWireBytes(codec, ws).
//   slots    each rank's receive buffer has `num_slots` slots per phase; tile t
//            travels through slot t % num_slots. The data from source rank s in
//            phase p (0 = scatter, 1 = gather) sits at RecvOffset(); offsets do
//            not depend on the message size or the codec.
//
// Per tile, rank `me` does (ws = world size):
//   phase 1  for s in 0..ws-1: EncodeInputSegment(tile, s) -> rank s's slot,
//            phase 0, source `me`.
//            wait until all ws sources arrived in my phase-0 slot;
//            ReduceSegment(the ws encodings in source order 0..ws-1) -> reduced.
//   phase 2  EncodeReducedSegment(reduced) -> every rank's slot, phase 1,
//            source `me` (including my own);
//            wait for all ws sources in my phase-1 slot;
//            for s in 0..ws-1: DecodeOutputSegment(source s's data, tile, s).
// Every rank decodes the same bytes for every output segment, so outputs are
// bit-identical on all ranks (the owner also decodes its own re-encoding).
//
// All functions are pure except for the memory they write and thread-safe on
// distinct outputs. The step functions never allocate (scratch lives on the
// stack, < 40 KiB); ReferenceAllReduce allocates its exchange buffers.
#ifndef QR_KERNELS_TWO_SHOT_REFERENCE_H_
#define QR_KERNELS_TWO_SHOT_REFERENCE_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/codec.h"
#include "kernels/types.h"

namespace qr::kernels {

inline constexpr int64_t kTileElems = 16384;
inline constexpr int64_t kTileBytes = kTileElems * 2;     // 32768
inline constexpr int64_t kSlotBytes = kTileBytes;         // wire bytes of a tile, any codec
inline constexpr int kMaxWorldSize = 8;

// What a call reduces. Trivially copyable; the same on every rank.
struct TwoShotParams {
  int world_size = 2;           // 2, 4 or 8
  Codec codec = Codec::kFp;     // kInt3 only with world_size 2
  DType dtype = DType::kFloat16;
  bool cast_bf16_to_fp16 = false;  // only meaningful for kBFloat16
  int64_t num_elems = 0;        // values per rank; a multiple of 8 (16 bytes)
};

// kInvalidArgument naming the problem: world size not 2/4/8, codec or dtype out
// of range, INT3 with world size != 2, negative num_elems or not a multiple of 8.
[[nodiscard]] Status ValidateTwoShotParams(const TwoShotParams& p);

constexpr int64_t NumTiles(int64_t num_elems) {
  return (num_elems + kTileElems - 1) / kTileElems;
}
constexpr int64_t SegmentElems(int world_size) { return kTileElems / world_size; }
constexpr int64_t SegmentWireBytes(Codec codec, int world_size) {
  return WireBytes(codec, SegmentElems(world_size));
}
// Bytes reserved per source rank inside a slot (the FP segment size).
constexpr int64_t SourceStrideBytes(int world_size) { return kSlotBytes / world_size; }
constexpr int64_t SlotOfTile(int64_t tile, int64_t num_slots) { return tile % num_slots; }
// Size of one rank's receive buffer: 2 phases x num_slots x 32 KiB.
constexpr int64_t RecvBufferBytes(int64_t num_slots) { return 2 * num_slots * kSlotBytes; }
// Byte offset, in the receiver's buffer, of the data sent by `source_rank` in
// `phase` (0 or 1) through `slot`.
constexpr int64_t RecvOffset(int64_t num_slots, int64_t slot, int phase, int source_rank,
                             int world_size) {
  return (phase * num_slots + slot) * kSlotBytes + source_rank * SourceStrideBytes(world_size);
}

// Phase 1: encodes segment `segment` of tile `tile` of this rank's `input`
// (p.num_elems values of p.dtype) into SegmentWireBytes(p.codec,
// p.world_size) bytes at `wire`, for rank `segment`. Values past num_elems
// encode as +0; bf16 is cast to fp16 (saturating) first when p asks for it.
void EncodeInputSegment(const TwoShotParams& p, const uint16_t* input, int64_t tile,
                        int segment, uint8_t* wire);

// Phase 1 reduce: decodes the world_size encodings `received[0..ws-1]`
// (received[s] = what source rank s sent, each SegmentWireBytes long) to fp32,
// sums them in fp32 in source order (acc = v0; acc = acc + v1; ...), and rounds
// the sum once to the work dtype (saturating) into SegmentElems(ws) values at
// `reduced`.
void ReduceSegment(const TwoShotParams& p, const uint8_t* const* received, uint16_t* reduced);

// Phase 2: encodes a reduced segment (SegmentElems(ws) work-dtype values).
void EncodeReducedSegment(const TwoShotParams& p, const uint16_t* reduced, uint8_t* wire);

// Phase 2 gather: decodes segment `segment` of tile `tile` from `wire` (what
// its owner, rank `segment`, sent) and writes its values that lie below
// p.num_elems into `output` (p.dtype): decoded fp32 -> work dtype
// (saturating RNE) -> bf16 (RNE) when casting.
void DecodeOutputSegment(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int segment,
                         uint16_t* output);

// All ranks in one process: inputs[r] / outputs[r] hold p.num_elems values of
// rank r (outputs[r] may equal inputs[r]). Built only from the step functions
// above, tile by tile. Returns ValidateTwoShotParams' errors.
[[nodiscard]] Status ReferenceAllReduce(const TwoShotParams& p, const uint16_t* const* inputs,
                                        uint16_t* const* outputs);

}  // namespace qr::kernels

#endif  // QR_KERNELS_TWO_SHOT_REFERENCE_H_
