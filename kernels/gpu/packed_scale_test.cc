// packed_scale.h (what the kernels compute) against the host definition
// kernels/packed_codec.h, for every finite positive fp16 block maximum.
#include "kernels/gpu/packed_scale.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/float16.h"
#include "kernels/packed_codec.h"

namespace qr::kernels::gpu {
namespace {

TEST(PackedScaleTest, EqualsTheDefinitionForEveryBlockMaximum) {
  for (Codec codec : {Codec::kInt3, Codec::kInt4, Codec::kInt6}) {
    const packed::AbsmaxRange fast = packed::FastPathAbsmax(codec);
    int fast_blocks = 0;
    for (uint32_t a = 1; a < kFp16Inf; ++a) {
      const uint16_t bits = static_cast<uint16_t>(a);
      const PackedScale got = PackedScaleOf(codec, a);
      const float want = packed::EncodeMultiplier(codec, bits);
      ASSERT_EQ(FloatBits(got.multiplier), FloatBits(want)) << "codec " << int(codec) << " a " << a;
      ASSERT_EQ(FloatToHalf(got.quotient), packed::ScaleWord(codec, want))
          << "codec " << int(codec) << " a " << a;
      if (a >= fast.first && a <= fast.last) {
        // The fast path's fp16 multiplier: the same value, a normal fp16.
        const uint32_t half = PackedMultiplierHalf(got.multiplier);
        ASSERT_GE(half, 0x0400u) << a;
        ASSERT_LT(half, uint32_t{kFp16Inf}) << a;
        ASSERT_EQ(HalfToFloat(static_cast<uint16_t>(half)), got.multiplier) << a;
        ++fast_blocks;
      }
    }
    EXPECT_EQ(fast_blocks, fast.last - fast.first + 1);
  }
}

}  // namespace
}  // namespace qr::kernels::gpu
