#include "kernels/two_shot_reference.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/limits.h"
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
  QR_RETURN_IF_ERROR(ValidateWorldSize(p.world_size));
  if (!IsValidCodec(static_cast<int>(p.codec))) {
    return InvalidArgumentError("codec must be 0..4 (FP, INT8, INT6, INT4, INT3), got " +
                                std::to_string(static_cast<int>(p.codec)));
  }
  if (!IsValidDType(static_cast<int>(p.dtype))) {
    return InvalidArgumentError("dtype must be 0 (fp16) or 1 (bf16), got " +
                                std::to_string(static_cast<int>(p.dtype)));
  }
  if (!CodecRunsAtWorldSize(p.codec, p.world_size)) {
    return InvalidArgumentError("INT3 needs world size 2, got " + std::to_string(p.world_size));
  }
  if (p.num_elems < 0 || !IsWholeMessageUnits(static_cast<uint64_t>(p.num_elems) * 2)) {
    return InvalidArgumentError(
        "element count must be a non-negative multiple of 8 (16 bytes), got " +
        std::to_string(p.num_elems));
  }
  return OkStatus();
}

void EncodeInputShard(const TwoShotParams& p, const uint16_t* input, int64_t tile, int shard,
                      uint8_t* wire) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const int64_t shard_elems = ShardElems(p.world_size);
  const int64_t base = tile * kTileElems + shard * shard_elems;
  const int64_t row_bytes = AtomRowWireBytes(p.codec);
  uint16_t row[kAtomRowElems];
  for (int64_t r = 0; r < shard_elems / kAtomRowElems; ++r) {
    const int64_t row_base = base + r * kAtomRowElems;
    for (int i = 0; i < kAtomRowElems; ++i) row[i] = LoadInput(p, input, row_base + i);
    EncodeAtomRow(p.codec, work, row, wire + r * row_bytes);
  }
}

void ReduceShard(const TwoShotParams& p, const uint8_t* const* received, uint16_t* reduced) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const int64_t shard_elems = ShardElems(p.world_size);
  const int64_t row_bytes = AtomRowWireBytes(p.codec);
  float acc[kAtomRowElems];
  float next[kAtomRowElems];
  for (int64_t r = 0; r < shard_elems / kAtomRowElems; ++r) {
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

void EncodeReducedShard(const TwoShotParams& p, const uint16_t* reduced, uint8_t* wire) {
  EncodeSpan(p.codec, WorkDType(p.dtype, p.cast_bf16_to_fp16), reduced, ShardElems(p.world_size),
             wire);
}

void DecodeOutputShard(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int shard,
                       uint16_t* output) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const bool cast_back = work != p.dtype;
  const int64_t shard_elems = ShardElems(p.world_size);
  const int64_t base = tile * kTileElems + shard * shard_elems;
  const int64_t row_bytes = AtomRowWireBytes(p.codec);
  float row[kAtomRowElems];
  for (int64_t r = 0; r < shard_elems / kAtomRowElems; ++r) {
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
  const int64_t shard_wire = ShardWireBytes(p.codec, ws);
  // One slot per phase suffices in one process: tiles run one after another.
  // recv[phase][receiver][source] = the bytes source sent to receiver.
  std::vector<uint8_t> phase0(static_cast<size_t>(ws * ws * shard_wire));
  std::vector<uint8_t> phase1(static_cast<size_t>(ws * shard_wire));
  std::vector<uint16_t> reduced(static_cast<size_t>(ShardElems(ws)));
  std::vector<const uint8_t*> received(static_cast<size_t>(ws));
  for (int64_t tile = 0; tile < NumTiles(p.num_elems); ++tile) {
    for (int src = 0; src < ws; ++src) {
      for (int dst = 0; dst < ws; ++dst) {
        EncodeInputShard(p, inputs[src], tile, dst, phase0.data() + (dst * ws + src) * shard_wire);
      }
    }
    // Phase 2's data is the same for every receiver, so one copy per owner.
    for (int owner = 0; owner < ws; ++owner) {
      for (int src = 0; src < ws; ++src) {
        received[src] = phase0.data() + (owner * ws + src) * shard_wire;
      }
      ReduceShard(p, received.data(), reduced.data());
      EncodeReducedShard(p, reduced.data(), phase1.data() + owner * shard_wire);
    }
    for (int rank = 0; rank < ws; ++rank) {
      for (int owner = 0; owner < ws; ++owner) {
        DecodeOutputShard(p, phase1.data() + owner * shard_wire, tile, owner, outputs[rank]);
      }
    }
  }
  return OkStatus();
}

}  // namespace qr::kernels
