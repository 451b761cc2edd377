// Host-side parts of the GPU kernels' API: buffer layout and grid (no GPU
// needed; runs in CI). rank_state_test.cc checks the launch validation.
#include "kernels/gpu/two_shot.h"

#include <gtest/gtest.h>

#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {
namespace {

TEST(TwoShotLayoutTest, OffsetsAreFixedAndPageAligned) {
  const TwoShotLayout l = MakeTwoShotLayout(264);
  EXPECT_EQ(l.flags1, 0u);
  EXPECT_EQ(l.flags2 % 4096, 0u);
  EXPECT_GE(l.flags2, 2 * 264u * kMaxWorldSize * 4);  // two rows per block
  EXPECT_EQ(l.data1, 2 * l.flags2);
  EXPECT_EQ(l.data2, l.data1 + 2 * 264 * kTileSlotBytes);
  EXPECT_EQ(l.oneshot, l.data2 + 2 * 264 * kTileSlotBytes);
  EXPECT_EQ(l.total, l.oneshot + 2 * kOneShotRegionBytes);
}

TEST(TwoShotLayoutTest, FootprintStaysUnder100MiB) {
  // H200 (132 SMs) at the default blocks per SM, and any device at the cap
  // (MI300X's 304 CUs reach it).
  EXPECT_LE(MakeTwoShotLayout(132 * kTwoShotBlocksPerSm).total, 84u << 20);
  EXPECT_LE(MakeTwoShotLayout(kTwoShotMaxLayoutBlocks).total, 100u << 20);
  EXPECT_LT(kTwoShotMaxLayoutBlocks, 304 * kTwoShotBlocksPerSm);
}

TEST(TwoShotGridTest, OneBlockPerTileUpToTheCap) {
  EXPECT_EQ(TwoShotGrid(16, 264), 1);
  EXPECT_EQ(TwoShotGrid(kTileBytes, 264), 1);
  EXPECT_EQ(TwoShotGrid(kTileBytes + 16, 264), 2);
  EXPECT_EQ(TwoShotGrid(size_t{1} << 30, 264), 264);
}

}  // namespace
}  // namespace qr::kernels
