#include "kernels/codec.h"

#include <cmath>

#include "common/status_macros.h"
#include "kernels/float16.h"

namespace qr::kernels {
namespace {

void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void StoreU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Codes of one block (32 values) from its scale word. The scale is shared by
// the 4 atoms of the block, so a GPU computes it with a 4-lane max reduction.
void QuantizeBlock(Codec codec, DType work, const uint16_t* values, uint16_t scale,
                   uint8_t* codes) {
  const int q = CodeBias(codec);
  const bool quantize = scale != 0 && IsFinite16(work, scale);
  if (!quantize) {
    for (int j = 0; j < kBlockElems; ++j) codes[j] = static_cast<uint8_t>(q);
    return;
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
}

void PackAtom(Codec codec, const uint8_t* u, int t, uint8_t* row) {
  switch (codec) {
    case Codec::kInt8:
      for (int j = 0; j < kAtomElems; ++j) row[8 * t + j] = u[j];
      break;
    case Codec::kInt4: {
      uint32_t w = 0;
      for (int j = 0; j < kAtomElems; ++j) w |= static_cast<uint32_t>(u[j]) << (4 * j);
      StoreU32(row + 4 * t, w);
      break;
    }
    case Codec::kInt6: {
      uint32_t lo = 0;
      uint32_t hi = 0;
      for (int j = 0; j < kAtomElems; ++j) {
        lo |= static_cast<uint32_t>(u[j] & 15u) << (4 * j);
        hi |= static_cast<uint32_t>(u[j] >> 4) << (2 * j);
      }
      StoreU32(row + 4 * t, lo);
      StoreU16(row + HighPlaneOffset(codec) + 2 * t, static_cast<uint16_t>(hi));
      break;
    }
    case Codec::kInt3: {
      uint32_t lo = 0;
      uint32_t hi = 0;
      for (int j = 0; j < kAtomElems; ++j) {
        lo |= static_cast<uint32_t>(u[j] & 3u) << (2 * j);
        hi |= static_cast<uint32_t>(u[j] >> 2) << j;
      }
      StoreU16(row + 2 * t, static_cast<uint16_t>(lo));
      row[HighPlaneOffset(codec) + t] = static_cast<uint8_t>(hi);
      break;
    }
    case Codec::kFp:
      QR_CHECK(false) << "PackAtom called for FP";
  }
}

void UnpackAtom(Codec codec, const uint8_t* row, int t, uint8_t* u) {
  switch (codec) {
    case Codec::kInt8:
      for (int j = 0; j < kAtomElems; ++j) u[j] = row[8 * t + j];
      break;
    case Codec::kInt4: {
      const uint32_t w = LoadU32(row + 4 * t);
      for (int j = 0; j < kAtomElems; ++j) u[j] = (w >> (4 * j)) & 15u;
      break;
    }
    case Codec::kInt6: {
      const uint32_t lo = LoadU32(row + 4 * t);
      const uint32_t hi = LoadU16(row + HighPlaneOffset(codec) + 2 * t);
      for (int j = 0; j < kAtomElems; ++j) {
        u[j] = static_cast<uint8_t>(((lo >> (4 * j)) & 15u) | (((hi >> (2 * j)) & 3u) << 4));
      }
      break;
    }
    case Codec::kInt3: {
      const uint32_t lo = LoadU16(row + 2 * t);
      const uint32_t hi = row[HighPlaneOffset(codec) + t];
      for (int j = 0; j < kAtomElems; ++j) {
        u[j] = static_cast<uint8_t>(((lo >> (2 * j)) & 3u) | (((hi >> j) & 1u) << 2));
      }
      break;
    }
    case Codec::kFp:
      QR_CHECK(false) << "UnpackAtom called for FP";
  }
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

void EncodeAtomRow(Codec codec, DType work, const uint16_t* values, uint8_t* wire) {
  if (codec == Codec::kFp) {
    for (int i = 0; i < kAtomRowElems; ++i) StoreU16(wire + 2 * i, values[i]);
    return;
  }
  const int64_t scale_offset = ScaleOffset(codec);
  uint8_t codes[kBlockElems];
  for (int b = 0; b < kAtomRowBlocks; ++b) {
    const uint16_t* block = values + b * kBlockElems;
    const uint16_t scale = BlockScaleBits(work, block);
    StoreU16(wire + scale_offset + kScaleBytes * b, scale);
    QuantizeBlock(codec, work, block, scale, codes);
    for (int i = 0; i < kAtomsPerBlock; ++i) {
      PackAtom(codec, codes + kAtomElems * i, b * kAtomsPerBlock + i, wire);
    }
  }
}

void DecodeAtomRow(Codec codec, DType work, const uint8_t* wire, float* values) {
  if (codec == Codec::kFp) {
    for (int i = 0; i < kAtomRowElems; ++i) values[i] = ToFloat(work, LoadU16(wire + 2 * i));
    return;
  }
  const int q = CodeBias(codec);
  const float c = ScaleFactor(codec);
  const int64_t scale_offset = ScaleOffset(codec);
  uint8_t codes[kAtomElems];
  for (int b = 0; b < kAtomRowBlocks; ++b) {
    const float d = ToFloat(work, LoadU16(wire + scale_offset + kScaleBytes * b)) * c;
    for (int i = 0; i < kAtomsPerBlock; ++i) {
      const int t = b * kAtomsPerBlock + i;
      UnpackAtom(codec, wire, t, codes);
      for (int j = 0; j < kAtomElems; ++j) {
        values[t * kAtomElems + j] = static_cast<float>(static_cast<int>(codes[j]) - q) * d;
      }
    }
  }
}

void EncodeSpan(Codec codec, DType work, const uint16_t* values, int64_t num_elems, uint8_t* wire) {
  QR_DCHECK(num_elems % kAtomRowElems == 0);
  const int64_t row_bytes = AtomRowWireBytes(codec);
  for (int64_t r = 0; r < num_elems / kAtomRowElems; ++r) {
    EncodeAtomRow(codec, work, values + r * kAtomRowElems, wire + r * row_bytes);
  }
}

void DecodeSpan(Codec codec, DType work, const uint8_t* wire, int64_t num_elems, float* values) {
  QR_DCHECK(num_elems % kAtomRowElems == 0);
  const int64_t row_bytes = AtomRowWireBytes(codec);
  for (int64_t r = 0; r < num_elems / kAtomRowElems; ++r) {
    DecodeAtomRow(codec, work, wire + r * row_bytes, values + r * kAtomRowElems);
  }
}

}  // namespace qr::kernels
