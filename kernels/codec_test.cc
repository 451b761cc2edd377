#include "kernels/codec.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/error_bound.h"
#include "kernels/float16.h"
#include "kernels/test_data.h"

namespace qr::kernels {
namespace {

constexpr Codec kIntCodecs[] = {Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3};

uint16_t H(double v) { return FloatToHalf(static_cast<float>(v)); }

uint32_t U32At(const std::vector<uint8_t>& w, int64_t off) {
  return w[off] | (w[off + 1] << 8) | (w[off + 2] << 16) |
         (static_cast<uint32_t>(w[off + 3]) << 24);
}
uint16_t U16At(const std::vector<uint8_t>& w, int64_t off) {
  return static_cast<uint16_t>(w[off] | (w[off + 1] << 8));
}

TEST(CodecTest, CodecFromNameInvertsCodecName) {
  for (Codec c : kAllCodecs) EXPECT_EQ(CodecFromName(CodecName(c)), c);
  EXPECT_EQ(CodecFromName("INT5"), std::nullopt);
  EXPECT_EQ(CodecFromName("int8"), std::nullopt);
  EXPECT_EQ(CodecFromName(""), std::nullopt);
}

TEST(CodecTest, WireBudgetsPerThirtyTwoValues) {
  // Issue 3: INT8 <= 8.5, INT6 <= 6.5, INT4 <= 4.5, INT3 <= 3.5 bits/value.
  const double limits[] = {16, 8.5, 6.5, 4.5, 3.5};
  const int bytes_per_32[] = {64, 34, 26, 18, 14};
  for (Codec c : kAllCodecs) {
    const int i = static_cast<int>(c);
    const double bits = AtomRowWireBytes(c) * 8.0 / kAtomRowElems;
    EXPECT_LE(bits, limits[i]) << CodecName(c);
    EXPECT_EQ(AtomRowWireBytes(c) / kAtomRowBlocks, bytes_per_32[i]) << CodecName(c);
    EXPECT_EQ(AtomRowWireBytes(c) % 16, 0) << CodecName(c);
    if (c != Codec::kFp) {
      EXPECT_EQ(AtomRowWireBytes(c), kAtomRowElems * CodecBits(c) / 8 + kAtomRowBlocks * 2);
    }
  }
}

// One atom row whose block 0 holds `atom0` (8 values) and zeros elsewhere.
std::vector<uint8_t> EncodeFirstAtom(Codec codec, const std::vector<double>& atom0) {
  std::vector<uint16_t> row(kAtomRowElems, 0);
  for (int j = 0; j < 8; ++j) row[j] = H(atom0[j]);
  std::vector<uint8_t> wire(AtomRowWireBytes(codec));
  EncodeAtomRow(codec, DType::kFloat16, row.data(), wire.data());
  return wire;
}

// Block maxima chosen so that d = a * c rounds to exactly 1.0: codes are then
// rint(x) + Q, checked by hand against docs/codecs.md.
TEST(CodecTest, GoldenLayoutInt4) {
  const auto w = EncodeFirstAtom(Codec::kInt4, {-7, -2.5, -0.5, 0, 0.5, 1.5, 7, 7.5});
  EXPECT_EQ(U32At(w, 0), 0xFFA88861u);
  EXPECT_EQ(U32At(w, 4), 0x88888888u);  // atom 1: zeros -> code Q
  EXPECT_EQ(U16At(w, 1024), 0x4780);    // scale of block 0 = 7.5
  EXPECT_EQ(U16At(w, 1026), 0x0000);    // block 1 is all zero
  std::vector<float> out(kAtomRowElems);
  DecodeAtomRow(Codec::kInt4, DType::kFloat16, w.data(), out.data());
  const float expected[] = {-7, -2, 0, 0, 0, 2, 7, 7};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(out[j], expected[j]) << j;
  for (int j = 8; j < kAtomRowElems; ++j) ASSERT_EQ(FloatBits(out[j]), 0u) << j;
}

TEST(CodecTest, GoldenLayoutInt8) {
  const auto w = EncodeFirstAtom(Codec::kInt8, {-127, -1, 0, 1, 2.5, 3.5, 126, 127.5});
  const uint8_t expected[] = {1, 127, 128, 129, 130, 132, 254, 255};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(w[j], expected[j]) << j;
  EXPECT_EQ(w[8], 128);
  EXPECT_EQ(U16At(w, 2048), 0x57F8);  // 127.5
}

TEST(CodecTest, GoldenLayoutInt6) {
  const auto w = EncodeFirstAtom(Codec::kInt6, {-31, -17, -1, 0, 1, 16, 30, 31.5});
  EXPECT_EQ(U32At(w, 0), 0xFE010FF1u);  // low 4 bits
  EXPECT_EQ(U16At(w, 1024), 0xFE90);    // high 2 bits
  EXPECT_EQ(U32At(w, 4), 0x00000000u);  // zero code 32 = low 0, high 2
  EXPECT_EQ(U16At(w, 1026), 0xAAAA);
  EXPECT_EQ(U16At(w, 1536), 0x4FE0);  // 31.5
}

TEST(CodecTest, GoldenLayoutInt3) {
  const auto w = EncodeFirstAtom(Codec::kInt3, {-3, -2, -1, 0, 1, 2, 3, 3.5});
  EXPECT_EQ(U16At(w, 0), 0xF939);  // low 2 bits
  EXPECT_EQ(w[512], 0xF8);         // high bit
  EXPECT_EQ(U16At(w, 2), 0x0000);  // zero code 4 = low 0, high 1
  EXPECT_EQ(w[513], 0xFF);
  EXPECT_EQ(U16At(w, 768), 0x4300);  // 3.5
}

TEST(CodecTest, FpIsRawBits) {
  std::vector<uint16_t> row(kAtomRowElems);
  for (int i = 0; i < kAtomRowElems; ++i) row[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<uint8_t> wire(AtomRowWireBytes(Codec::kFp));
  EncodeAtomRow(Codec::kFp, DType::kBFloat16, row.data(), wire.data());
  for (int i = 0; i < kAtomRowElems; ++i) ASSERT_EQ(U16At(wire, 2 * i), row[i]);
}

// The largest magnitude of each block, computed independently of the codec.
std::vector<double> BlockAbsmax(DType dtype, const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size() / kBlockElems, 0.0);
  for (size_t i = 0; i < v.size(); ++i) {
    out[i / kBlockElems] = std::max(out[i / kBlockElems], std::fabs(double{ToFloat(dtype, v[i])}));
  }
  return out;
}

struct RoundTripStats {
  double max_ratio = 0;
  int64_t violations = 0;
};

RoundTripStats CheckRoundTrip(Codec codec, DType dtype, const std::vector<uint16_t>& values) {
  std::vector<uint8_t> wire(WireBytes(codec, values.size()));
  EncodeSpan(codec, dtype, values.data(), values.size(), wire.data());
  std::vector<float> decoded(values.size());
  DecodeSpan(codec, dtype, wire.data(), values.size(), decoded.data());
  const std::vector<double> absmax = BlockAbsmax(dtype, values);
  RoundTripStats stats;
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = ToFloat(dtype, values[i]);
    const double err = std::fabs(double{decoded[i]} - x);
    const double bound = QuantizationErrorBound(codec, absmax[i / kBlockElems]);
    if (!(err <= bound)) {
      if (stats.violations++ < 5) {
        ADD_FAILURE() << CodecName(codec) << " " << DTypeName(dtype) << " i=" << i << " x=" << x
                      << " decoded=" << decoded[i] << " err=" << err << " bound=" << bound;
      }
    }
    if (err > 0) stats.max_ratio = std::max(stats.max_ratio, err / bound);
  }
  return stats;
}

class CodecBoundTest : public ::testing::TestWithParam<std::tuple<Codec, DType>> {};

// >= 10^7 random values per codec and dtype, every one within the bound, and
// the bound is nearly attained (it is tight, not just valid).
TEST_P(CodecBoundTest, OneQuantizationWithinBoundOnTenMillionValues) {
  const auto [codec, dtype] = GetParam();
  constexpr int64_t kRows = 4883;  // 10,000,384 values
  std::vector<uint16_t> values(kRows * kAtomRowElems);
  std::mt19937_64 rng(1234 + static_cast<int>(codec) * 10 + static_cast<int>(dtype));
  testing::FillRandomBlocks(dtype, rng, 0, values.data(), values.size());
  const RoundTripStats stats = CheckRoundTrip(codec, dtype, values);
  EXPECT_EQ(stats.violations, 0);
  EXPECT_GT(stats.max_ratio, 0.99);
  std::printf("one-quantization %s %s: worst error / bound = %.8f\n", CodecName(codec),
              DTypeName(dtype), stats.max_ratio);
  RecordProperty("worst_ratio", std::to_string(stats.max_ratio));
}

TEST_P(CodecBoundTest, AdversarialBlocksWithinBound) {
  const auto [codec, dtype] = GetParam();
  const auto blocks = testing::AdversarialBlocks(dtype);
  std::vector<uint16_t> values;
  for (const auto& b : blocks) values.insert(values.end(), b.begin(), b.end());
  values.resize((values.size() + kAtomRowElems - 1) / kAtomRowElems * kAtomRowElems, 0);
  const RoundTripStats stats = CheckRoundTrip(codec, dtype, values);
  EXPECT_EQ(stats.violations, 0);

  std::vector<uint8_t> wire(WireBytes(codec, values.size()));
  EncodeSpan(codec, dtype, values.data(), values.size(), wire.data());
  std::vector<float> decoded(values.size());
  DecodeSpan(codec, dtype, wire.data(), values.size(), decoded.data());
  // All-zero blocks (0 and 1) decode to +0 exactly.
  for (int j = 0; j < 64; ++j) EXPECT_EQ(FloatBits(decoded[j]), 0u) << j;
  for (size_t i = 0; i < values.size(); ++i) {
    // Narrowing to the dtype keeps every decoded value finite, even next to ±max.
    ASSERT_TRUE(IsFinite16(dtype, FromFloat(dtype, decoded[i]))) << i;
  }
  // Max below 1e-4 (block 4): no reciprocal cliff, the largest value comes back
  // within the relative bound instead of collapsing to zero.
  const double levels = 2.0 * CodeBias(codec) - 1.0;
  const double a = BlockAbsmax(dtype, values)[4];
  EXPECT_LT(a, 1e-4);
  for (int j = 0; j < 32; ++j) {
    const double x = ToFloat(dtype, values[4 * 32 + j]);
    EXPECT_LE(std::fabs(decoded[4 * 32 + j] - x), a / levels * 1.001) << j;
  }
}

INSTANTIATE_TEST_SUITE_P(IntCodecs, CodecBoundTest,
                         ::testing::Combine(::testing::ValuesIn(kIntCodecs),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::string(CodecName(std::get<0>(info.param))) + "_" +
                                  DTypeName(std::get<1>(info.param));
                         });

TEST(CodecTest, FpRoundTripIsExact) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<uint16_t> values(4 * kAtomRowElems);
    std::mt19937_64 rng(7);
    testing::FillRandomBlocks(dtype, rng, 0, values.data(), values.size());
    const RoundTripStats stats = CheckRoundTrip(Codec::kFp, dtype, values);
    EXPECT_EQ(stats.violations, 0);
    EXPECT_EQ(stats.max_ratio, 0.0);
  }
}

TEST(CodecTest, NonFiniteValuePoisonsOnlyItsBlock) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (Codec codec : kIntCodecs) {
      for (uint16_t bad :
           {InfBits(dtype), static_cast<uint16_t>(0x8000 | InfBits(dtype)), CanonicalNaN(dtype)}) {
        std::vector<uint16_t> values(kAtomRowElems, FromFloat(dtype, 1.5f));
        values[32 + 9] = bad;  // block 1
        std::vector<uint8_t> wire(AtomRowWireBytes(codec));
        EncodeAtomRow(codec, dtype, values.data(), wire.data());
        EXPECT_EQ(U16At(wire, ScaleOffset(codec) + 2), CanonicalNaN(dtype));
        std::vector<float> out(kAtomRowElems);
        DecodeAtomRow(codec, dtype, wire.data(), out.data());
        for (int i = 0; i < kAtomRowElems; ++i) {
          if (i / 32 == 1) {
            ASSERT_TRUE(std::isnan(out[i])) << i;
          } else {
            ASSERT_LE(std::fabs(out[i] - 1.5f), QuantizationErrorBound(codec, 1.5)) << i;
          }
        }
      }
    }
  }
}

TEST(CodecTest, NegligibleBf16BlocksAreSentAsZero) {
  std::vector<uint16_t> values(kAtomRowElems, FloatToBFloat16(0x1p-101f));
  values[40] = FloatToBFloat16(0x1p-100f);  // block 1 reaches the threshold
  EXPECT_EQ(BlockScaleBits(DType::kBFloat16, values.data()), 0);
  EXPECT_EQ(BlockScaleBits(DType::kBFloat16, values.data() + 32), kBf16NegligibleAbsmaxBits);
  std::vector<uint8_t> wire(AtomRowWireBytes(Codec::kInt4));
  EncodeAtomRow(Codec::kInt4, DType::kBFloat16, values.data(), wire.data());
  std::vector<float> out(kAtomRowElems);
  DecodeAtomRow(Codec::kInt4, DType::kBFloat16, wire.data(), out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_GT(out[40], 0.0f);
  // fp16 has no such floor: the smallest subnormal is still quantized.
  std::vector<uint16_t> h(32, 0);
  h[3] = 0x0001;
  EXPECT_EQ(BlockScaleBits(DType::kFloat16, h.data()), 0x0001);
}

// The bound is not vacuous: on uniform data the mean INT4 error is within 2x
// of the theoretical mean d/4 per element (d = a / 7.5, errors uniform on
// [-d/2, d/2]).
TEST(CodecTest, Int4MeanErrorOnUniformDataMatchesTheory) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    constexpr int64_t kRows = 512;
    std::vector<uint16_t> values(kRows * kAtomRowElems);
    std::mt19937_64 rng(99);
    testing::FillUniform(dtype, rng, values.data(), values.size());
    std::vector<uint8_t> wire(WireBytes(Codec::kInt4, values.size()));
    EncodeSpan(Codec::kInt4, dtype, values.data(), values.size(), wire.data());
    std::vector<float> decoded(values.size());
    DecodeSpan(Codec::kInt4, dtype, wire.data(), values.size(), decoded.data());
    const std::vector<double> absmax = BlockAbsmax(dtype, values);
    double measured = 0;
    double theory = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      measured += std::fabs(decoded[i] - double{ToFloat(dtype, values[i])});
      theory += absmax[i / kBlockElems] / 7.5 / 4.0;
    }
    const double ratio = measured / theory;
    std::printf("INT4 %s uniform: mean error %.6g, theory %.6g, ratio %.4f\n", DTypeName(dtype),
                measured / values.size(), theory / values.size(), ratio);
    EXPECT_GT(ratio, 0.5);
    EXPECT_LT(ratio, 2.0);
  }
}

}  // namespace
}  // namespace qr::kernels
