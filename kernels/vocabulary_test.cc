// The constexpr vocabulary the host reference and the GPU codecs share
// (types.h, codec_layout.h, geometry.h): its values are docs/codecs.md's.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/codec_layout.h"
#include "kernels/geometry.h"
#include "kernels/types.h"

namespace qr::kernels {
namespace {

float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(CodecLayoutTest, ScaleFactorBitsAreOneOverQMinusHalf) {
  for (Codec c : {Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3}) {
    const double q = CodeBias(c);
    EXPECT_EQ(FloatOfBits(ScaleFactorBits(c)), static_cast<float>(1.0 / (q - 0.5))) << CodecName(c);
  }
  EXPECT_EQ(ScaleFactorBits(Codec::kFp), 0u);
}

TEST(CodecLayoutTest, RowSizesAndPlanesMatchTheDocument) {
  struct Row {
    Codec codec;
    int64_t row_bytes, high_offset, scale_offset;
    int low_atom_bytes, high_atom_bytes;
    double bytes_per_32_values;
  };
  const Row rows[] = {
      {Codec::kInt8, 2176, 0, 2048, 8, 0, 34},
      {Codec::kInt6, 1664, 1024, 1536, 4, 2, 26},
      {Codec::kInt4, 1152, 0, 1024, 4, 0, 18},
      {Codec::kInt3, 896, 512, 768, 2, 1, 14},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(AtomRowWireBytes(r.codec), r.row_bytes) << CodecName(r.codec);
    EXPECT_EQ(HighPlaneOffset(r.codec), r.high_offset) << CodecName(r.codec);
    EXPECT_EQ(ScaleOffset(r.codec), r.scale_offset) << CodecName(r.codec);
    EXPECT_EQ(LowPlaneAtomBytes(r.codec), r.low_atom_bytes) << CodecName(r.codec);
    EXPECT_EQ(HighPlaneAtomBytes(r.codec), r.high_atom_bytes) << CodecName(r.codec);
    EXPECT_EQ(WireRatio(r.codec), r.bytes_per_32_values / 64) << CodecName(r.codec);
  }
  EXPECT_EQ(AtomRowWireBytes(Codec::kFp), 4096);
  EXPECT_EQ(WireRatio(Codec::kFp), 1.0);
}

TEST(GeometryTest, ShardsAndOneShotLimits) {
  for (int ws : kSupportedWorldSizes) {
    EXPECT_EQ(ShardElems(ws) * ws, kTileElems);
    for (Codec c : kAllCodecs) EXPECT_LE(ShardWireBytes(c, ws) * ws, kTileSlotBytes);
    EXPECT_EQ(OneShotMaxBytes(ws) * ws, kOneShotRegionBytes);
    EXPECT_EQ(OneShotMaxElems(ws) * 2, OneShotMaxBytes(ws));
  }
  EXPECT_EQ(OneShotMaxBytes(2), int64_t{4} << 20);
}

TEST(TypesTest, Int3RunsOnlyAtWorldSizeTwo) {
  for (int ws : kSupportedWorldSizes) {
    for (Codec c : kAllCodecs) {
      EXPECT_EQ(CodecRunsAtWorldSize(c, ws), c != Codec::kInt3 || ws == 2)
          << CodecName(c) << " " << ws;
    }
  }
}

TEST(TypesTest, WorkFormatOfACall) {
  EXPECT_EQ(WorkFormatOf(DType::kFloat16, false), WorkFormat::kFp16);
  EXPECT_EQ(WorkFormatOf(DType::kFloat16, true), WorkFormat::kFp16);
  EXPECT_EQ(WorkFormatOf(DType::kBFloat16, false), WorkFormat::kBf16);
  EXPECT_EQ(WorkFormatOf(DType::kBFloat16, true), WorkFormat::kBf16Cast);
  for (WorkFormat f : kAllWorkFormats) {
    EXPECT_EQ(WorkFormatMathDType(f), WorkDType(WorkFormatDType(f), f == WorkFormat::kBf16Cast));
  }
  EXPECT_STREQ(WorkFormatName(WorkFormat::kFp16), "fp16");
  EXPECT_STREQ(WorkFormatName(WorkFormat::kBf16), "bf16");
  EXPECT_STREQ(WorkFormatName(WorkFormat::kBf16Cast), "bf16cast");
}

}  // namespace
}  // namespace qr::kernels
