#include "kernels/float16.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace qr::kernels {
namespace {

// GCC's _Float16 (x86-64, SSE2) converts with IEEE round-to-nearest-even; it
// is the independent oracle for the non-saturated range.
uint16_t OracleHalfBits(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, sizeof(u));
  return u;
}

TEST(Float16Test, HalfToFloatIsExactForEveryPattern) {
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const uint16_t h = static_cast<uint16_t>(u);
    _Float16 oracle;
    std::memcpy(&oracle, &h, sizeof(h));
    const float f = HalfToFloat(h);
    if (std::isnan(static_cast<float>(oracle))) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << u;
    } else {
      EXPECT_EQ(FloatBits(f), FloatBits(static_cast<float>(oracle))) << std::hex << u;
    }
  }
}

TEST(Float16Test, FloatToHalfRoundTripsEveryFiniteHalf) {
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const uint16_t h = static_cast<uint16_t>(u);
    if ((h & 0x7FFF) > 0x7C00) continue;  // NaN
    EXPECT_EQ(FloatToHalf(HalfToFloat(h)), h) << std::hex << u;
  }
}

TEST(Float16Test, FloatToHalfMatchesIeeeRneBelowSaturation) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 4000000; ++i) {
    // Bias towards the fp16 range (exponents 100..143) and include halfway cases.
    uint32_t u = bits(rng);
    const uint32_t exp = 100 + (u % 44);
    u = (u & 0x80000000u) | (exp << 23) | (bits(rng) & 0x7FFFFFu);
    if (i % 4 == 0) u = (u & ~0x1FFFu) | 0x1000u;  // exact tie for normals
    const float f = BitsToFloat(u);
    if (std::fabs(f) >= 65520.0f) continue;
    ASSERT_EQ(FloatToHalf(f), OracleHalfBits(f)) << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 3000000);
}

TEST(Float16Test, FloatToHalfSaturatesFiniteAndKeepsInfNan) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7BFF);  // IEEE would give inf
  EXPECT_EQ(FloatToHalf(1e30f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(-1e30f), 0xFBFF);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::max()), 0x7BFF);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(FloatToHalf(NAN), kFp16CanonicalNaN);
  EXPECT_EQ(FloatToHalf(-NAN), kFp16CanonicalNaN);
}

TEST(Float16Test, FloatToHalfSubnormalsAndTies) {
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);    // tie -> even (0)
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);  // tie 1.5 -> 2
  EXPECT_EQ(FloatToHalf(0x1.4p-23f), 0x0002);  // 2.5 -> 2
  EXPECT_EQ(FloatToHalf(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(FloatToHalf(-0x1p-24f), 0x8001);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(0x1.ff8p-15f), 0x03FF);  // largest subnormal
  EXPECT_EQ(FloatToHalf(0x1.ffcp-15f), 0x0400);  // tie 1023.5 -> 1024, the first normal
}

TEST(Float16Test, BFloat16RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3F808001u)), 0x3F81);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), kBf16Max);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0x8000 | kBf16Max);
  EXPECT_EQ(FloatToBFloat16(INFINITY), kBf16Inf);
  EXPECT_EQ(FloatToBFloat16(NAN), kBf16CanonicalNaN);
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x00018000u)), 0x0002);  // subnormal tie -> even
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const uint16_t b = static_cast<uint16_t>(u);
    if ((b & 0x7FFF) > 0x7F80) continue;
    EXPECT_EQ(FloatToBFloat16(BFloat16ToFloat(b)), b) << std::hex << u;
  }
}

TEST(Float16Test, Bf16ToFp16CastSaturatesAndNeverMakesInfFromFinite) {
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const uint16_t b = static_cast<uint16_t>(u);
    const float f = BFloat16ToFloat(b);
    const uint16_t h = BFloat16ToHalf(b);
    if (std::isnan(f)) {
      EXPECT_EQ(h, kFp16CanonicalNaN);
    } else if (std::isinf(f)) {
      EXPECT_EQ(h, f > 0 ? 0x7C00 : 0xFC00);
    } else {
      ASSERT_TRUE(IsFinite16(DType::kFloat16, h)) << std::hex << u;
      if (std::fabs(f) >= 65504.0f) {
        EXPECT_EQ(h & 0x7FFF, kFp16Max) << std::hex << u;
        EXPECT_EQ(h & 0x8000, b & 0x8000);
      } else {
        EXPECT_EQ(h, OracleHalfBits(f)) << std::hex << u;
      }
    }
  }
  EXPECT_EQ(BFloat16ToHalf(FloatToBFloat16(70000.0f)), 0x7BFF);
  EXPECT_EQ(BFloat16ToHalf(FloatToBFloat16(-1e38f)), 0xFBFF);
}

TEST(Float16Test, HalfToBFloat16RoundsOnce) {
  // 1 + 2^-10 (fp16) lies below the bf16 midpoint of 1 and 1 + 2^-7.
  EXPECT_EQ(HalfToBFloat16(0x3C01), 0x3F80);
  EXPECT_EQ(HalfToBFloat16(0x7BFF), FloatToBFloat16(65504.0f));
  EXPECT_EQ(HalfToBFloat16(0x7C00), kBf16Inf);
  EXPECT_EQ(HalfToBFloat16(0x7E00), kBf16CanonicalNaN);
}

}  // namespace
}  // namespace qr::kernels
