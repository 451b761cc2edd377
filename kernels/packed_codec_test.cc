// Every claim of kernels/packed_codec.h checked against exact integer
// arithmetic: the multiplier's definition and the missing clamp for every fp16
// block maximum, the scale word and the decode for every input, the fused
// reduce over whole sweeps of its operands, and the error bound exhaustively
// over the binades where it can be reached.
#include "kernels/packed_codec.h"

#include <cmath>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "kernels/float16.h"

namespace qr::kernels::packed {
namespace {

using int128 = __int128;

constexpr Codec kPackedCodecs[] = {Codec::kInt3, Codec::kInt4, Codec::kInt6};
constexpr uint16_t kMaxFinite = 0x7BFF;

int BitLength(int128 v) {
  int n = 0;
  while (v > 0) {
    v >>= 1;
    ++n;
  }
  return n;
}

// A positive fp16 value as significand * 2^exponent, significand an integer.
struct Exact {
  int64_t significand;
  int exponent;
};

Exact ExactHalf(uint16_t h) {
  const int field = (h >> 10) & 0x1F;
  const int64_t mant = h & 0x3FF;
  if (field == 0) return {mant, -24};
  return {mant | 0x400, field - 25};
}

Exact ExactFloat(float f) {
  int exp2 = 0;
  const double fraction = std::frexp(static_cast<double>(f), &exp2);
  return {static_cast<int64_t>(std::ldexp(fraction, 24)), exp2 - 24};
}

// num / den * 2^exp2 >= 2^e?  (num, den > 0)
bool AtLeastPowerOfTwo(int128 num, int128 den, int exp2, int e) {
  const int shift = exp2 - e;
  if (shift >= 0) return (num << shift) >= den;
  return num >= (den << -shift);
}

// The correctly rounded (to nearest, ties to even) fp16 of sign *
// num / den * 2^exp2, saturating to ±65504, computed with integers only.
uint16_t ExactRn16(bool negative, int128 num, int128 den, int exp2) {
  const uint16_t sign = negative ? 0x8000 : 0;
  if (num == 0) return sign;
  // 2^e <= v < 2^(e+1).
  int e = BitLength(num) - BitLength(den) + exp2;
  while (!AtLeastPowerOfTwo(num, den, exp2, e)) --e;
  while (AtLeastPowerOfTwo(num, den, exp2, e + 1)) ++e;
  const int ulp = std::max(e - 10, -24);
  // q = floor(v / 2^ulp), rem / scaled_den the fraction left.
  int128 scaled_num = num, scaled_den = den;
  if (exp2 - ulp >= 0) {
    scaled_num <<= (exp2 - ulp);
  } else {
    scaled_den <<= (ulp - exp2);
  }
  int128 q = scaled_num / scaled_den;
  const int128 rem2 = 2 * (scaled_num % scaled_den);
  if (rem2 > scaled_den || (rem2 == scaled_den && (q & 1))) ++q;
  int exponent = ulp;
  if (q == 2048) {
    q = 1024;
    ++exponent;
  }
  if (q < 1024) return sign | static_cast<uint16_t>(q);  // subnormal (exponent -24)
  const int field = exponent + 25;
  if (field >= 31) return sign | kFp16Max;
  return sign | static_cast<uint16_t>((field << 10) | static_cast<int>(q - 1024));
}

// sign * m * 2^e for a signed integer m.
uint16_t ExactRn16(int128 m, int e) { return ExactRn16(m < 0, m < 0 ? -m : m, 1, e); }

TEST(PackedCodecTest, MultiplierIsTheLargest11BitNumberStrictlyBelowKOverA) {
  for (Codec codec : kPackedCodecs) {
    const int128 two_k = 2 * CodeBias(codec) - 1;  // 2K, an integer
    for (uint16_t a = 1; a <= kMaxFinite; ++a) {
      const float e = EncodeMultiplier(codec, a);
      const Exact ee = ExactFloat(e), ea = ExactHalf(a);
      // 11 significant bits: the low 13 of the 24-bit significand are zero.
      ASSERT_EQ(ee.significand % (1 << 13), 0) << CodecName(codec) << " a=" << a;
      const int128 me = ee.significand >> 13;
      // e * a < K  <=>  me * ma * 2^exponent < 2K.
      const int exponent = ee.exponent + 13 + ea.exponent + 1;
      const auto below = [&](int128 m) {
        if (exponent >= 0) return (m * ea.significand) << exponent < two_k;
        return m * ea.significand < (two_k << -exponent);
      };
      EXPECT_TRUE(below(me)) << CodecName(codec) << " a=" << a;
      EXPECT_FALSE(below(me + 1)) << CodecName(codec) << " a=" << a;
    }
  }
}

// rint(x * e) grows with |x|, so |k| <= Q - 1 at x = a is |k| <= Q - 1 for
// every |x| <= a: no value of any block needs a clamp.
TEST(PackedCodecTest, NoCodeNeedsAClamp) {
  for (Codec codec : kPackedCodecs) {
    const int q = CodeBias(codec);
    for (uint16_t a = 1; a <= kMaxFinite; ++a) {
      const float e = EncodeMultiplier(codec, a);
      const int hi = Quantize(codec, a, e), lo = Quantize(codec, a | 0x8000, e);
      ASSERT_LE(hi, 2 * q - 1) << CodecName(codec) << " a=" << a;
      ASSERT_GE(lo, 1) << CodecName(codec) << " a=" << a;
      // The bound is reached: the block's extreme uses the largest code.
      ASSERT_EQ(hi, 2 * q - 1) << CodecName(codec) << " a=" << a;
    }
  }
}

TEST(PackedCodecTest, FastPathIsWhereTheMultiplierIsANormalFp16) {
  for (Codec codec : kPackedCodecs) {
    const AbsmaxRange range = FastPathAbsmax(codec);
    for (uint16_t a = 1; a <= kMaxFinite; ++a) {
      const float e = EncodeMultiplier(codec, a);
      const bool normal_fp16 =
          e >= 6.103515625e-05f && e <= 65504.0f && HalfToFloat(FloatToHalf(e)) == e;
      ASSERT_EQ(normal_fp16, a >= range.first && a <= range.last)
          << CodecName(codec) << " a=" << a << " e=" << e;
    }
  }
}

// The GPU quantizes with fma.rn.f16x2(x, e, M), M = 1024 + Q: in [1024, 2048)
// fp16 has spacing 1 and M is even, so RN16(x * e + M) = M + rint_even(x e).
TEST(PackedCodecTest, MagicConstantFmaGivesTheCode) {
  std::mt19937 rng(18);
  for (Codec codec : kPackedCodecs) {
    const int q = CodeBias(codec);
    for (uint16_t a = FastPathAbsmax(codec).first; a <= FastPathAbsmax(codec).last; a += 7) {
      const float e = EncodeMultiplier(codec, a);
      const Exact ee = ExactFloat(e);
      for (int trial = 0; trial < 48; ++trial) {
        const uint16_t x = static_cast<uint16_t>(rng() % (a + 1)) | ((rng() & 1) ? 0x8000 : 0);
        const Exact ex = ExactHalf(x & 0x7FFF);
        // x * e + M as an integer times 2^exponent.
        const int exponent = ex.exponent + ee.exponent;
        int128 product = static_cast<int128>(ex.significand) * ee.significand;
        if (x & 0x8000) product = -product;
        ASSERT_LT(exponent, 0);
        const int128 sum = product + (static_cast<int128>(1024 + q) << -exponent);
        const uint16_t fma = ExactRn16(sum, exponent);
        EXPECT_EQ(HalfToFloat(fma), 1024.0f + static_cast<float>(Quantize(codec, x, e)))
            << CodecName(codec) << " a=" << a << " x=" << x;
      }
    }
  }
}

// Also: d~ never falls as a grows (the largest word is a = 65504's).
TEST(PackedCodecTest, ScaleWordIsTheCorrectlyRoundedQuotient) {
  for (Codec codec : kPackedCodecs) {
    uint16_t previous = 0;
    for (uint16_t a = 1; a <= kMaxFinite; ++a) {
      const Exact ee = ExactFloat(EncodeMultiplier(codec, a));
      // 2^s / e = 1 / significand * 2^(s - exponent).
      const uint16_t want = ExactRn16(false, 1, ee.significand, ScaleShift(codec) - ee.exponent);
      ASSERT_EQ(ScaleWord(codec, EncodeMultiplier(codec, a)), want)
          << CodecName(codec) << " a=" << a;
      ASSERT_GT(want, 0) << "the scale word stays non-zero";
      ASSERT_GE(want, previous) << CodecName(codec) << " a=" << a;
      previous = want;
    }
  }
}

TEST(PackedCodecTest, DecodeIsOneRoundingOfTheExactProduct) {
  for (Codec codec : kPackedCodecs) {
    const int q = CodeBias(codec);
    for (uint16_t d = 1; d <= kMaxFinite; ++d) {
      const Exact ed = ExactHalf(d);
      for (int u = 1; u <= 2 * q - 1; ++u) {
        const uint16_t want =
            ExactRn16(static_cast<int128>(u - q) * ed.significand, ed.exponent - ScaleShift(codec));
        ASSERT_EQ(Decode(codec, u, d), want) << CodecName(codec) << " d=" << d << " u=" << u;
      }
    }
    EXPECT_EQ(Decode(codec, q + 1, kFp16CanonicalNaN), kFp16CanonicalNaN);
  }
}

// Every decoded rank-0 value (all 63488 finite fp16 of both signs) against
// sampled rank-1 codes and scales, including the largest, which saturate.
TEST(PackedCodecTest, FusedReduceIsOneRoundingOfTheExactSum) {
  std::mt19937 rng(1801);
  for (Codec codec : kPackedCodecs) {
    const int q = CodeBias(codec);
    for (int trial = 0; trial < 40; ++trial) {
      const int u1 =
          trial < 2 ? (trial == 0 ? 1 : 2 * q - 1) : 1 + static_cast<int>(rng() % (2 * q - 1));
      const uint16_t d1 = trial < 2 ? kMaxFinite : static_cast<uint16_t>(1 + rng() % kMaxFinite);
      const Exact ed = ExactHalf(d1);
      for (uint32_t bits = 0; bits <= 0xFBFF; ++bits) {
        const uint16_t x0 = static_cast<uint16_t>(bits);
        if ((x0 & 0x7FFF) > kMaxFinite) continue;
        const Exact ex = ExactHalf(x0 & 0x7FFF);
        // Both addends in units of 2^-30.
        const int s = ScaleShift(codec);
        const int128 p = (static_cast<int128>(u1 - q) * ed.significand) << (ed.exponent - s + 30);
        int128 x = static_cast<int128>(ex.significand) << (ex.exponent + 30);
        if (x0 & 0x8000) x = -x;
        const uint16_t want = ExactRn16(p + x, -30);
        const uint16_t got = FusedReduce(codec, u1, d1, x0);
        // -0 + +0 is +0 in IEEE (round to nearest): ExactRn16 gives +0 for 0.
        ASSERT_EQ(got, want) << CodecName(codec) << " u1=" << u1 << " d1=" << d1 << " x0=" << x0;
      }
    }
    EXPECT_EQ(FusedReduce(codec, q, kFp16CanonicalNaN, 0x3C00), kFp16CanonicalNaN);
    EXPECT_EQ(FusedReduce(codec, q, 0x3C00, kFp16CanonicalNaN), kFp16CanonicalNaN);
  }
}

// Results scale exactly by powers of two while no value is subnormal, so the
// binade [1, 2) stands for every normal one; the lowest binades (subnormal
// scale words and decoded values) and the top one (near 65504) are swept too.
TEST(PackedCodecTest, QuantizationStaysWithinItsBoundAndTheBoundIsTight) {
  struct Range {
    uint16_t first, last;
  };
  const Range ranges[] = {{0x0001, 0x07FF}, {0x3C00, 0x3FFF}, {0x7800, kMaxFinite}};
  for (Codec codec : kPackedCodecs) {
    double worst = 0;
    for (const Range& range : ranges) {
      for (uint32_t a = range.first; a <= range.last; ++a) {
        const float e = EncodeMultiplier(codec, static_cast<uint16_t>(a));
        const uint16_t d = ScaleWord(codec, e);
        const double bound = QuantizationErrorBound(codec, HalfToFloat(static_cast<uint16_t>(a)));
        for (uint32_t x = 0; x <= a; ++x) {
          const uint16_t back = Decode(codec, Quantize(codec, static_cast<uint16_t>(x), e), d);
          const double err = std::fabs(static_cast<double>(HalfToFloat(back)) -
                                       HalfToFloat(static_cast<uint16_t>(x)));
          ASSERT_LE(err, bound) << CodecName(codec) << " a=" << a << " x=" << x;
          worst = std::max(worst, err / bound);
        }
      }
    }
    EXPECT_GT(worst, 0.97) << CodecName(codec) << ": the bound should be nearly reached";
  }
}

TEST(PackedCodecTest, BlocksOfZerosAndOfInfSendTheCodeOfZero) {
  uint8_t codes[32];
  uint16_t zeros[32] = {};
  zeros[5] = 0x8000;  // -0
  EXPECT_EQ(EncodeBlock(Codec::kInt4, zeros, 32, codes), 0);
  for (uint8_t c : codes) EXPECT_EQ(c, 8);
  uint16_t with_inf[32] = {};
  with_inf[31] = kFp16Inf;
  EXPECT_EQ(EncodeBlock(Codec::kInt4, with_inf, 32, codes), kFp16CanonicalNaN);
  for (uint8_t c : codes) EXPECT_EQ(c, 8);
  // A block of ones: e = 7.5 - 2^-8 (7.5 itself is not strictly below
  // K / a), every code 15, decoded to RN16(1.75 * RN16(4 / e)).
  uint16_t ones[32];
  for (uint16_t& v : ones) v = 0x3C00;
  const uint16_t scale = EncodeBlock(Codec::kInt4, ones, 32, codes);
  EXPECT_EQ(EncodeMultiplier(Codec::kInt4, 0x3C00), 7.5f - 1.0f / 256);
  EXPECT_EQ(scale, FloatToHalf(4.0f / (7.5f - 1.0f / 256)));
  for (uint8_t c : codes) EXPECT_EQ(c, 15);
  const float back = HalfToFloat(Decode(Codec::kInt4, codes[0], scale));
  EXPECT_NEAR(back, 1.0f, QuantizationErrorBound(Codec::kInt4, 1.0));
  EXPECT_NE(back, 1.0f);
}

}  // namespace
}  // namespace qr::kernels::packed
