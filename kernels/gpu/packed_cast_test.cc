// packed_cast.h's model of the device's packed bf16 <-> fp16 conversions
// against kernels/float16.h, for every 16-bit input each way: wherever the
// exact path's test lets the fast result through, it is the reference's.
#include "kernels/gpu/packed_cast.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/float16.h"

namespace qr::kernels::gpu {
namespace {

using cast_model::IsNaNBf16;
using cast_model::IsNaNFp16;
using cast_model::IsNonFiniteHalf;

TEST(PackedCastTest, Bf16ToFp16IsTheSaturatingCastWhereverTheTestPassesIt) {
  int exact_path = 0;
  for (uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const uint16_t in = static_cast<uint16_t>(b);
    const uint16_t fast = cast_model::Bf16ToFp16Rn(in);
    const uint16_t want = BFloat16ToHalf(in);
    const uint32_t mag = b & 0x7FFFu;
    // The fast result is inf or NaN exactly for bf16 NaN, inf and finite
    // values of 65536 (0x4780) and above, the only ones that round past
    // 65504 (bf16 has no value in (65280, 65536)).
    ASSERT_EQ(IsNonFiniteHalf(fast), mag >= 0x4780u) << std::hex << b;
    if (IsNonFiniteHalf(fast)) {
      ++exact_path;
      ASSERT_EQ(IsNaNFp16(fast), IsNaNBf16(in)) << std::hex << b;
      continue;
    }
    ASSERT_EQ(fast, want) << std::hex << b;
  }
  EXPECT_EQ(exact_path, 2 * (0x8000 - 0x4780));
}

TEST(PackedCastTest, Fp16ToBf16IsTheCastBackForEveryNonNaNInput) {
  int nans = 0;
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const uint16_t in = static_cast<uint16_t>(h);
    const uint16_t fast = cast_model::Fp16ToBf16Rn(in);
    if (IsNaNFp16(in)) {
      ++nans;
      ASSERT_TRUE(IsNaNBf16(fast)) << std::hex << h;
      ASSERT_TRUE(IsNonFiniteHalf(in));  // the test sends it to the exact path
      continue;
    }
    // inf included: the exact path's test also takes it, needlessly.
    ASSERT_EQ(fast, HalfToBFloat16(in)) << std::hex << h;
  }
  EXPECT_EQ(nans, 2 * 1023);
}

// Both halves of a pair convert independently (no carry or borrow between
// them), whatever the partner.
TEST(PackedCastTest, PairsConvertEachHalfOnItsOwn) {
  constexpr uint16_t kPartners[] = {0x0000, 0x8000, 0x0001, 0x3C00, 0x7BFF, 0x7C00, 0x7E00,
                                    0x7F7F, 0x7F80, 0x7FC0, 0xFFFF, 0x4780, 0xC77F};
  for (uint32_t v = 0; v <= 0xFFFFu; ++v) {
    const uint16_t x = static_cast<uint16_t>(v);
    for (uint16_t p : kPartners) {
      const uint32_t lo = x | (static_cast<uint32_t>(p) << 16);
      const uint32_t hi = p | (static_cast<uint32_t>(x) << 16);
      ASSERT_EQ(cast_model::Bf16x2ToFp16x2Rn(lo) & 0xFFFFu, cast_model::Bf16ToFp16Rn(x));
      ASSERT_EQ(cast_model::Bf16x2ToFp16x2Rn(hi) >> 16, cast_model::Bf16ToFp16Rn(x));
      ASSERT_EQ(cast_model::Fp16x2ToBf16x2Rn(lo) & 0xFFFFu, cast_model::Fp16ToBf16Rn(x));
      ASSERT_EQ(cast_model::Fp16x2ToBf16x2Rn(hi) >> 16, cast_model::Fp16ToBf16Rn(x));
    }
  }
}

// The rounding routine on its own, at the edges the conversions reach.
TEST(PackedCastTest, RoundToFormatEdges) {
  using cast_model::RoundToFormat;
  EXPECT_EQ(RoundToFormat(false, 1, -24, 5, 10), 0x0001);  // smallest fp16 subnormal
  EXPECT_EQ(RoundToFormat(false, 1, -25, 5, 10), 0x0000);  // half of it: ties to even
  EXPECT_EQ(RoundToFormat(false, 3, -26, 5, 10), 0x0001);  // 0.75 of it rounds up
  EXPECT_EQ(RoundToFormat(true, 0x3FF, -24, 5, 10), 0x83FF);
  EXPECT_EQ(RoundToFormat(false, 0x7FF, -25, 5, 10), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(RoundToFormat(false, 65504, 0, 5, 10), 0x7BFF);
  EXPECT_EQ(RoundToFormat(false, 65519, 0, 5, 10), 0x7BFF);
  EXPECT_EQ(RoundToFormat(false, 65520, 0, 5, 10), 0x7C00);  // overflow: inf, not saturated
  EXPECT_EQ(RoundToFormat(true, 0x181, 0, 8, 7), 0xC3C0);    // 385 -> 384 (tie to even)
  EXPECT_EQ(RoundToFormat(false, 0x183, 0, 8, 7), 0x43C2);   // 387 -> 388
}

}  // namespace
}  // namespace qr::kernels::gpu
