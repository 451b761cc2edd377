#include "kernels/codec.h"

#include <cmath>

#include "common/status_macros.h"
#include "kernels/float16.h"
#include "kernels/packed_codec.h"

namespace qr::kernels {
namespace {

// Little-endian words of `bytes` bytes (1..8).
void StoreLE(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t LoadLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

float ScaleFactor(Codec codec) { return BitsToFloat(ScaleFactorBits(codec)); }

uint16_t BlockScaleBits(DType work, const uint16_t* values) {
  uint16_t amax = 0;
  for (int j = 0; j < kBlockElems; ++j) {
    const uint16_t m = values[j] & 0x7FFFu;
    if (m > amax) amax = m;
  }
  if (amax >= InfBits(work)) return CanonicalNaN(work);
  if (work == DType::kBFloat16 && amax < kBf16NegligibleAbsmaxBits) return 0;
  return amax;
}

uint16_t QuantizeBlockFp32(Codec codec, DType work, const uint16_t* values, uint8_t* codes) {
  const uint16_t scale = BlockScaleBits(work, values);
  const int q = CodeBias(codec);
  if (scale == 0 || !IsFinite16(work, scale)) {
    for (int j = 0; j < kBlockElems; ++j) codes[j] = static_cast<uint8_t>(q);
    return scale;
  }
  const float d = ToFloat(work, scale) * ScaleFactor(codec);
  const float e = 1.0f / d;
  // Symmetric range: ±a maps to ±(Q - 0.5) and is clamped to ±(Q - 1), so a
  // decoded value never exceeds a (no fp32 overflow next to bf16's max).
  const float lo = static_cast<float>(1 - q);
  const float hi = static_cast<float>(q - 1);
  for (int j = 0; j < kBlockElems; ++j) {
    const float v = ToFloat(work, values[j]) * e;
    float k = std::rint(v);
    k = k < lo ? lo : (k > hi ? hi : k);
    codes[j] = static_cast<uint8_t>(static_cast<int>(k) + q);
  }
  return scale;
}

float DecodeCodeFp32(Codec codec, DType work, int code, uint16_t scale) {
  const float d = ToFloat(work, scale) * ScaleFactor(codec);
  return static_cast<float>(code - CodeBias(codec)) * d;
}

uint16_t QuantizeBlock(Codec codec, DType work, const uint16_t* values, uint8_t* codes) {
  QR_DCHECK(codec != Codec::kFp);
  if (UsesPackedArithmetic(codec, work))
    return packed::EncodeBlock(codec, values, kBlockElems, codes);
  return QuantizeBlockFp32(codec, work, values, codes);
}

float DecodeCode(Codec codec, DType work, int code, uint16_t scale) {
  if (UsesPackedArithmetic(codec, work)) return HalfToFloat(packed::Decode(codec, code, scale));
  return DecodeCodeFp32(codec, work, code, scale);
}

void PackBlock(Codec codec, int world_size, int shard_block, const uint8_t* codes, uint16_t scale,
               uint8_t* wire) {
  QR_DCHECK(codec != Codec::kFp);
  const int k = shard_block / kAtomRowBlocks;
  const int b = shard_block % kAtomRowBlocks;
  const int low_bits = LowPlaneBits(codec);
  const uint32_t low_mask = (1u << low_bits) - 1;
  for (int a = 0; a < kAtomsPerBlock; ++a) {
    const int t = b * kAtomsPerBlock + a;
    const uint8_t* u = codes + a * kAtomElems;
    uint64_t low = 0;
    uint64_t high = 0;
    for (int j = 0; j < kAtomElems; ++j) {
      low |= static_cast<uint64_t>(u[j] & low_mask) << LowFieldShift(codec, j);
      high |= static_cast<uint64_t>(u[j] >> low_bits) << HighFieldShift(codec, j);
    }
    StoreLE(wire + ShardLowAtomOffset(codec, world_size, k, t), low, LowPlaneAtomBytes(codec));
    if (HasHighPlane(codec)) {
      StoreLE(wire + ShardHighAtomOffset(codec, world_size, k, t), high, HighPlaneAtomBytes(codec));
    }
  }
  StoreLE(wire + ShardScaleWordOffset(codec, world_size, k, b), scale | kScaleWireFlag,
          kScaleBytes);
}

uint16_t UnpackBlock(Codec codec, int world_size, const uint8_t* wire, int shard_block,
                     uint8_t* codes) {
  QR_DCHECK(codec != Codec::kFp);
  const int k = shard_block / kAtomRowBlocks;
  const int b = shard_block % kAtomRowBlocks;
  const int low_bits = LowPlaneBits(codec);
  const uint64_t low_mask = (uint64_t{1} << low_bits) - 1;
  const uint64_t high_mask = (uint64_t{1} << (CodecBits(codec) - low_bits)) - 1;
  for (int a = 0; a < kAtomsPerBlock; ++a) {
    const int t = b * kAtomsPerBlock + a;
    const uint64_t low =
        LoadLE(wire + ShardLowAtomOffset(codec, world_size, k, t), LowPlaneAtomBytes(codec));
    const uint64_t high =
        HasHighPlane(codec)
            ? LoadLE(wire + ShardHighAtomOffset(codec, world_size, k, t), HighPlaneAtomBytes(codec))
            : 0;
    for (int j = 0; j < kAtomElems; ++j) {
      const uint64_t lo = (low >> LowFieldShift(codec, j)) & low_mask;
      const uint64_t hi = (high >> HighFieldShift(codec, j)) & high_mask;
      codes[a * kAtomElems + j] = static_cast<uint8_t>(lo | (hi << low_bits));
    }
  }
  const uint64_t scale = LoadLE(wire + ShardScaleWordOffset(codec, world_size, k, b), kScaleBytes);
  return static_cast<uint16_t>(scale & ~uint64_t{kScaleWireFlag});
}

void EncodeShardBlock(Codec codec, DType work, int world_size, int shard_block,
                      const uint16_t* values, uint8_t* wire) {
  if (codec == Codec::kFp) {
    uint8_t* out = wire + int64_t{shard_block} * kBlockElems * 2;
    for (int j = 0; j < kBlockElems; ++j) StoreLE(out + 2 * j, values[j], 2);
    return;
  }
  uint8_t codes[kBlockElems];
  const uint16_t scale = QuantizeBlock(codec, work, values, codes);
  PackBlock(codec, world_size, shard_block, codes, scale, wire);
}

void DecodeShardBlock(Codec codec, DType work, int world_size, const uint8_t* wire, int shard_block,
                      float* values) {
  if (codec == Codec::kFp) {
    const uint8_t* in = wire + int64_t{shard_block} * kBlockElems * 2;
    for (int j = 0; j < kBlockElems; ++j) {
      values[j] = ToFloat(work, static_cast<uint16_t>(LoadLE(in + 2 * j, 2)));
    }
    return;
  }
  uint8_t codes[kBlockElems];
  const uint16_t scale = UnpackBlock(codec, world_size, wire, shard_block, codes);
  for (int j = 0; j < kBlockElems; ++j) values[j] = DecodeCode(codec, work, codes[j], scale);
}

void EncodeShard(Codec codec, DType work, int world_size, const uint16_t* values, uint8_t* wire) {
  const int blocks = ShardAtomRows(world_size) * kAtomRowBlocks;
  for (int sb = 0; sb < blocks; ++sb) {
    EncodeShardBlock(codec, work, world_size, sb, values + sb * kBlockElems, wire);
  }
}

void DecodeShard(Codec codec, DType work, int world_size, const uint8_t* wire, float* values) {
  const int blocks = ShardAtomRows(world_size) * kAtomRowBlocks;
  for (int sb = 0; sb < blocks; ++sb) {
    DecodeShardBlock(codec, work, world_size, wire, sb, values + sb * kBlockElems);
  }
}

}  // namespace qr::kernels
