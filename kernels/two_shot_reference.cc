#include "kernels/two_shot_reference.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/limits.h"
#include "common/status_macros.h"
#include "kernels/float16.h"
#include "kernels/packed_codec.h"

namespace qr::kernels {
namespace {

// Blocks of 32 values in one shard.
constexpr int ShardBlocks(int world_size) {
  return static_cast<int>(ShardElems(world_size) / kBlockElems);
}

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
  const int64_t base = tile * kTileElems + shard * ShardElems(p.world_size);
  uint16_t block[kBlockElems];
  for (int sb = 0; sb < ShardBlocks(p.world_size); ++sb) {
    const int64_t block_base = base + int64_t{sb} * kBlockElems;
    for (int j = 0; j < kBlockElems; ++j) block[j] = LoadInput(p, input, block_base + j);
    EncodeShardBlock(p.codec, work, p.world_size, sb, block, wire);
  }
}

void ReduceShard(const TwoShotParams& p, const uint8_t* const* received, uint16_t* reduced) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const int ws = p.world_size;
  for (int sb = 0; sb < ShardBlocks(ws); ++sb) {
    uint16_t* out = reduced + int64_t{sb} * kBlockElems;
    if (UsesPackedArithmetic(p.codec, work) && ws == 2) {
      // Rank 1's code and scale fold into rank 0's decoded fp16 value with
      // one rounding (packed::FusedReduce, saturating).
      uint8_t codes0[kBlockElems];
      uint8_t codes1[kBlockElems];
      const uint16_t scale0 = UnpackBlock(p.codec, ws, received[0], sb, codes0);
      const uint16_t scale1 = UnpackBlock(p.codec, ws, received[1], sb, codes1);
      for (int j = 0; j < kBlockElems; ++j) {
        out[j] = packed::FusedReduce(p.codec, codes1[j], scale1,
                                     packed::Decode(p.codec, codes0[j], scale0));
      }
      continue;
    }
    // fp32 left fold in source order of the decoded values (for packed
    // formats the fp16 decoded values, widened exactly), rounded once.
    float acc[kBlockElems];
    float next[kBlockElems];
    DecodeShardBlock(p.codec, work, ws, received[0], sb, acc);
    for (int s = 1; s < ws; ++s) {
      DecodeShardBlock(p.codec, work, ws, received[s], sb, next);
      for (int j = 0; j < kBlockElems; ++j) acc[j] = acc[j] + next[j];
    }
    for (int j = 0; j < kBlockElems; ++j) out[j] = FromFloat(work, acc[j]);
  }
}

void EncodeReducedShard(const TwoShotParams& p, const uint16_t* reduced, uint8_t* wire) {
  EncodeShard(p.codec, WorkDType(p.dtype, p.cast_bf16_to_fp16), p.world_size, reduced, wire);
}

void DecodeOutputShard(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int shard,
                       uint16_t* output) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const bool cast_back = work != p.dtype;
  const int64_t base = tile * kTileElems + shard * ShardElems(p.world_size);
  float block[kBlockElems];
  for (int sb = 0; sb < ShardBlocks(p.world_size); ++sb) {
    const int64_t block_base = base + int64_t{sb} * kBlockElems;
    if (block_base >= p.num_elems) break;
    // Packed formats decode to fp16 values already; the narrowing keeps them.
    DecodeShardBlock(p.codec, work, p.world_size, wire, sb, block);
    const int64_t n = std::min<int64_t>(kBlockElems, p.num_elems - block_base);
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t w = FromFloat(work, block[j]);
      output[block_base + j] = cast_back ? HalfToBFloat16(w) : w;
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
