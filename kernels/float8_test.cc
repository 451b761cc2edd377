#include "kernels/float8.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "kernels/float16.h"

namespace qr::kernels {
namespace {

float Value(uint8_t q) { return BitsToFloat(E4m3ToFloatBits(q)); }

uint8_t Encode(float f) { return E4m3FromFloatBits(FloatBits(f)); }

// The format from its definition, independent of the bit tricks:
// (-1)^s * 2^(e-7) * (1 + m/8), or 2^-6 * m/8 when e == 0.
double Defined(uint8_t q) {
  const int e = (q >> 3) & 0xF;
  const int m = q & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (q & 0x80) != 0 ? -mag : mag;
}

// Nearest finite code by search over all of them, ties to the even code,
// saturating at ±448.
uint8_t Nearest(float f) {
  if (std::isnan(f)) return kE4m3NaN;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= kE4m3MaxValue) return sign | kE4m3Max;
  uint8_t best = 0;
  for (uint8_t q = 1; q <= kE4m3Max; ++q) {
    const double d = std::fabs(Defined(q) - a), b = std::fabs(Defined(best) - a);
    if (d < b || (d == b && (q & 1) == 0)) best = q;
  }
  return sign | best;
}

TEST(Float8Test, DecodesEveryCodeAsDefined) {
  for (int q = 0; q < 256; ++q) {
    if ((q & 0x7F) == kE4m3NaN) {
      EXPECT_TRUE(std::isnan(Value(static_cast<uint8_t>(q)))) << q;
      continue;
    }
    EXPECT_EQ(static_cast<double>(Value(static_cast<uint8_t>(q))), Defined(static_cast<uint8_t>(q)))
        << q;
    EXPECT_EQ(std::signbit(Value(static_cast<uint8_t>(q))), (q & 0x80) != 0) << q;
  }
  EXPECT_EQ(Value(kE4m3Max), 448.0f);
  EXPECT_EQ(Value(1), std::ldexp(1.0f, -9));
}

TEST(Float8Test, EveryCodeRoundTrips) {
  for (int q = 0; q < 256; ++q) {
    if ((q & 0x7F) == kE4m3NaN) continue;
    EXPECT_EQ(Encode(Value(static_cast<uint8_t>(q))), q);
  }
}

// Between neighbours a < b: below the midpoint goes to a, above it to b,
// the midpoint itself (exact in fp32) to the even code.
TEST(Float8Test, MidpointsRoundToNearestEven) {
  for (uint8_t sign : {uint8_t{0}, uint8_t{0x80}}) {
    for (int q = 0; q < kE4m3Max; ++q) {
      const auto a = static_cast<uint8_t>(sign | q), b = static_cast<uint8_t>(sign | (q + 1));
      const float mid = (Value(a) + Value(b)) / 2;  // exact: five significant bits
      ASSERT_EQ(static_cast<double>(mid), (Defined(a) + Defined(b)) / 2);
      const float toward_a = std::nextafter(mid, Value(a));
      const float toward_b = std::nextafter(mid, Value(b));
      EXPECT_EQ(Encode(toward_a), a) << q;
      EXPECT_EQ(Encode(toward_b), b) << q;
      EXPECT_EQ(Encode(mid), (q & 1) == 0 ? a : b) << q;
    }
  }
}

TEST(Float8Test, SaturatesNaNsAndTinyValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Encode(448.0f), 0x7E);
  EXPECT_EQ(Encode(463.99f), 0x7E);
  EXPECT_EQ(Encode(464.0f), 0x7E);  // would round to 480, which e4m3 lacks
  EXPECT_EQ(Encode(1e30f), 0x7E);
  EXPECT_EQ(Encode(inf), 0x7E);
  EXPECT_EQ(Encode(-inf), 0xFE);
  EXPECT_EQ(Encode(-500.0f), 0xFE);
  EXPECT_EQ(Encode(std::numeric_limits<float>::quiet_NaN()), kE4m3NaN);
  EXPECT_EQ(Encode(-std::numeric_limits<float>::quiet_NaN()), kE4m3NaN);
  EXPECT_EQ(Encode(0.0f), 0x00);
  EXPECT_EQ(Encode(-0.0f), 0x80);
  EXPECT_EQ(Encode(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(Encode(std::ldexp(1.0f, -10)), 0x00);                        // half of 2^-9: even
  EXPECT_EQ(Encode(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);  // just above half
  EXPECT_EQ(Encode(std::ldexp(1.5f, -9)), 0x02);                         // 1.5 units: even 2
}

TEST(Float8Test, AgreesWithTheSearchOnRandomValues) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> exponent(-14, 10);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int i = 0; i < 200000; ++i) {
    float f = std::ldexp(mantissa(rng), exponent(rng));
    if (i % 2 != 0) f = -f;
    ASSERT_EQ(Encode(f), Nearest(f)) << f;
  }
  // And arbitrary bit patterns (NaNs, infinities, fp32 subnormals).
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = any(rng);
    ASSERT_EQ(E4m3FromFloatBits(u), Nearest(BitsToFloat(u))) << u;
  }
}

// The functions are constexpr so that GPU code runs them: a few compile-time
// answers hold them to it.
static_assert(E4m3FromFloatBits(0x43E00000u) == kE4m3Max);  // 448
static_assert(E4m3FromFloatBits(0x3F800000u) == 0x38);      // 1.0
static_assert(E4m3ToFloatBits(0x38) == 0x3F800000u);

}  // namespace
}  // namespace qr::kernels
