#include "kernels/two_shot_reference.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "kernels/float16.h"

namespace qr::kernels {
namespace {

constexpr int64_t kRowsPerTile = kTileElems / kAtomRowElems;  // 8

// Work-dtype bits of input value i (0 past the end: the padding).
uint16_t LoadInput(const TwoShotParams& p, const uint16_t* input, int64_t i) {
  if (i >= p.num_elems) return 0;
  const uint16_t v = input[i];
  if (p.dtype == DType::kBFloat16 && p.cast_bf16_to_fp16) return BFloat16ToHalf(v);
  return v;
}

}  // namespace

Status ValidateTwoShotParams(const TwoShotParams& p) {
  if (p.world_size != 2 && p.world_size != 4 && p.world_size != 8) {
    return InvalidArgumentError("world size must be 2, 4 or 8, got " +
                                std::to_string(p.world_size));
  }
  if (!IsValidCodec(static_cast<int>(p.codec))) {
    return InvalidArgumentError("codec must be 0..4 (FP, INT8, INT6, INT4, INT3), got " +
                                std::to_string(static_cast<int>(p.codec)));
  }
  if (!IsValidDType(static_cast<int>(p.dtype))) {
    return InvalidArgumentError("dtype must be 0 (fp16) or 1 (bf16), got " +
                                std::to_string(static_cast<int>(p.dtype)));
  }
  if (p.codec == Codec::kInt3 && p.world_size != 2) {
    return InvalidArgumentError("INT3 needs world size 2, got " + std::to_string(p.world_size));
  }
  if (p.num_elems < 0 || p.num_elems % 8 != 0) {
    return InvalidArgumentError("element count must be a non-negative multiple of 8 (16 bytes), got " +
                                std::to_string(p.num_elems));
  }
  return OkStatus();
}

void EncodeInputSegment(const TwoShotParams& p, const uint16_t* input, int64_t tile, int segment,
                        uint8_t* wire) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const int64_t seg_elems = SegmentElems(p.world_size);
  const int64_t base = tile * kTileElems + segment * seg_elems;
  const int64_t row_bytes = AtomRowWireBytes(p.codec);
  uint16_t row[kAtomRowElems];
  for (int64_t r = 0; r < seg_elems / kAtomRowElems; ++r) {
    const int64_t row_base = base + r * kAtomRowElems;
    for (int i = 0; i < kAtomRowElems; ++i) row[i] = LoadInput(p, input, row_base + i);
    EncodeAtomRow(p.codec, work, row, wire + r * row_bytes);
  }
}

void ReduceSegment(const TwoShotParams& p, const uint8_t* const* received, uint16_t* reduced) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const int64_t seg_elems = SegmentElems(p.world_size);
  const int64_t row_bytes = AtomRowWireBytes(p.codec);
  float acc[kAtomRowElems];
  float next[kAtomRowElems];
  for (int64_t r = 0; r < seg_elems / kAtomRowElems; ++r) {
    DecodeAtomRow(p.codec, work, received[0] + r * row_bytes, acc);
    for (int s = 1; s < p.world_size; ++s) {
      DecodeAtomRow(p.codec, work, received[s] + r * row_bytes, next);
      for (int i = 0; i < kAtomRowElems; ++i) acc[i] = acc[i] + next[i];
    }
    for (int i = 0; i < kAtomRowElems; ++i) {
      reduced[r * kAtomRowElems + i] = FromFloat(work, acc[i]);
    }
  }
}

void EncodeReducedSegment(const TwoShotParams& p, const uint16_t* reduced, uint8_t* wire) {
  EncodeSpan(p.codec, WorkDType(p.dtype, p.cast_bf16_to_fp16), reduced,
             SegmentElems(p.world_size), wire);
}

void DecodeOutputSegment(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int segment,
                         uint16_t* output) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const bool cast_back = work != p.dtype;
  const int64_t seg_elems = SegmentElems(p.world_size);
  const int64_t base = tile * kTileElems + segment * seg_elems;
  const int64_t row_bytes = AtomRowWireBytes(p.codec);
  float row[kAtomRowElems];
  for (int64_t r = 0; r < seg_elems / kAtomRowElems; ++r) {
    const int64_t row_base = base + r * kAtomRowElems;
    if (row_base >= p.num_elems) break;
    DecodeAtomRow(p.codec, work, wire + r * row_bytes, row);
    const int64_t n = std::min<int64_t>(kAtomRowElems, p.num_elems - row_base);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t w = FromFloat(work, row[i]);
      output[row_base + i] = cast_back ? HalfToBFloat16(w) : w;
    }
  }
}

Status ReferenceAllReduce(const TwoShotParams& p, const uint16_t* const* inputs,
                          uint16_t* const* outputs) {
  QR_RETURN_IF_ERROR(ValidateTwoShotParams(p));
  const int ws = p.world_size;
  const int64_t seg_wire = SegmentWireBytes(p.codec, ws);
  // One slot per phase suffices in one process: tiles run one after another.
  // recv[phase][receiver][source] = the bytes source sent to receiver.
  std::vector<uint8_t> phase0(static_cast<size_t>(ws * ws * seg_wire));
  std::vector<uint8_t> phase1(static_cast<size_t>(ws * seg_wire));
  std::vector<uint16_t> reduced(static_cast<size_t>(SegmentElems(ws)));
  std::vector<const uint8_t*> received(static_cast<size_t>(ws));
  for (int64_t tile = 0; tile < NumTiles(p.num_elems); ++tile) {
    for (int src = 0; src < ws; ++src) {
      for (int dst = 0; dst < ws; ++dst) {
        EncodeInputSegment(p, inputs[src], tile, dst,
                           phase0.data() + (dst * ws + src) * seg_wire);
      }
    }
    // Phase 2's data is the same for every receiver, so one copy per owner.
    for (int owner = 0; owner < ws; ++owner) {
      for (int src = 0; src < ws; ++src) {
        received[src] = phase0.data() + (owner * ws + src) * seg_wire;
      }
      ReduceSegment(p, received.data(), reduced.data());
      EncodeReducedSegment(p, reduced.data(), phase1.data() + owner * seg_wire);
    }
    for (int rank = 0; rank < ws; ++rank) {
      for (int owner = 0; owner < ws; ++owner) {
        DecodeOutputSegment(p, phase1.data() + owner * seg_wire, tile, owner, outputs[rank]);
      }
    }
  }
  return OkStatus();
}

}  // namespace qr::kernels
