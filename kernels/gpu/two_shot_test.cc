// Host-side parts of the GPU two-shot launch API: buffer layout, grid and
// argument validation (no GPU needed; runs in CI).
#include "kernels/gpu/two_shot.h"

#include <gtest/gtest.h>

#include "kernels/one_shot_reference.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;

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

TEST(LaunchTwoShotTest, RejectsBadArgumentsBeforeTouchingTheGpu) {
  TwoShotArgs a;
  a.count = 8;
  a.world_size = 3;
  EXPECT_THAT(LaunchTwoShot(a), StatusIs(StatusCode::kInvalidArgument));
  a.world_size = 2;
  a.rank = 2;
  EXPECT_THAT(LaunchTwoShot(a), StatusIs(StatusCode::kInvalidArgument));
  a.rank = 0;
  a.world_size = 4;
  a.codec = Codec::kInt3;
  EXPECT_THAT(LaunchTwoShot(a), StatusIs(StatusCode::kInvalidArgument));
  a.world_size = 2;
  a.codec = Codec::kFp;
  a.count = 7;  // 14 bytes
  EXPECT_THAT(LaunchTwoShot(a), StatusIs(StatusCode::kInvalidArgument));
  a.count = 8;  // null buffers
  EXPECT_THAT(LaunchTwoShot(a), StatusIs(StatusCode::kInvalidArgument));
  a.count = 0;  // nothing to do
  EXPECT_OK(LaunchTwoShot(a));
}

TEST(LaunchOneShotTest, RejectsWhatDoesNotFitBeforeTouchingTheGpu) {
  for (int ws : {2, 4, 8}) {
    TwoShotArgs a;
    a.world_size = ws;
    a.one_shot = true;
    // One 16-byte atom more than a source's share of the region.
    a.count = kOneShotRegionBytes / ws / 2 + 8;
    EXPECT_THAT(LaunchOneShot(a), StatusIs(StatusCode::kInvalidArgument)) << ws;
    EXPECT_THAT(LaunchAllReduce(a), StatusIs(StatusCode::kInvalidArgument)) << ws;
    // Exactly the share: past the size check, stopped by the null buffers.
    a.count = kOneShotRegionBytes / ws / 2;
    EXPECT_THAT(LaunchOneShot(a), StatusIs(StatusCode::kInvalidArgument)) << ws;
    a.count = 0;
    EXPECT_TRUE(LaunchOneShot(a).ok()) << ws;
  }
}

TEST(LaunchOneShotTest, IgnoresTheCodecButNotTheWorldSize) {
  TwoShotArgs a;
  a.one_shot = true;
  a.count = 0;
  a.world_size = 4;
  a.codec = Codec::kInt3;  // two-shot refuses INT3 at world size 4
  EXPECT_OK(LaunchOneShot(a));
  EXPECT_THAT(LaunchTwoShot(a), StatusIs(StatusCode::kInvalidArgument));
  a.world_size = 6;
  EXPECT_THAT(LaunchOneShot(a), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace qr::kernels
