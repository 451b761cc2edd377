// Host-side parts of the GPU kernels' API: buffer layout and grid (no GPU
// needed; runs in CI). rank_state_test.cc checks the launch validation.
#include "kernels/gpu/two_shot.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  EXPECT_EQ(l.credits, l.oneshot + 2 * kOneShotRegionBytes);
  EXPECT_EQ(l.credits % 4096, 0u);
  // A credit word per (block, warp, granting rank), page-rounded.
  EXPECT_GE(l.fused_lanes, l.credits + 264u * kTwoShotLayoutWarps * kMaxWorldSize * 4);
  EXPECT_LT(l.fused_lanes, l.credits + 264u * kTwoShotLayoutWarps * kMaxWorldSize * 4 + 4096);
  // The fused kernel's lane inboxes: 256 floats per part of a token row,
  // for the most (tokens x parts) a one-shot call can have.
  EXPECT_EQ(l.fused_lanes % 4096, 0u);
  EXPECT_EQ(l.total, l.fused_lanes + (1u << 20));
}

TEST(TwoShotLayoutTest, StateWordsHoldColoursErrorOneShotCountersCodecsAndAbortReadTime) {
  EXPECT_EQ(TwoShotStateWords(64), 3u * 64 + 2);
  // 0 is "no call yet": every codec's word differs from it and from the others.
  for (int a = 0; a < kNumCodecs; ++a) {
    EXPECT_NE(CodecStateWord(static_cast<Codec>(a)), 0u);
    for (int b = 0; b < a; ++b) {
      EXPECT_NE(CodecStateWord(static_cast<Codec>(a)), CodecStateWord(static_cast<Codec>(b)));
    }
  }
}

TEST(DataFlagRingTest, OnlyInt4AndInt8AreTheirOwnFlag) {
  EXPECT_TRUE(CanBeItsOwnFlag(Codec::kInt4));
  EXPECT_TRUE(CanBeItsOwnFlag(Codec::kInt8));
  EXPECT_FALSE(CanBeItsOwnFlag(Codec::kFp));
  EXPECT_FALSE(CanBeItsOwnFlag(Codec::kInt6));
  EXPECT_FALSE(CanBeItsOwnFlag(Codec::kInt3));
  for (Codec c : {Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3}) {
    EXPECT_EQ(UsesDataFlags(c), kDataFlagBuild && CanBeItsOwnFlag(c));
  }
  EXPECT_STREQ(TwoShotSyncName(), kDataFlagBuild ? "data_flag" : "flags");
}

// The ring lives inside each block's two rows of slots per phase whatever
// the codec and world size, with at least 3 rows (two_shot.h), and its
// offsets depend on the codec and world size only: a block's ring starts
// at a fixed offset, and row c % R, source slot of s, at fixed offsets in it.
TEST(DataFlagRingTest, RingFitsEachBlocksSlotsAndSourcesTileARow) {
  EXPECT_GE(kDataFlagRingRows, 3);
  EXPECT_EQ(kDataFlagRingRows & (kDataFlagRingRows - 1), 0);
  for (Codec c : {Codec::kInt4, Codec::kInt8}) {
    for (int ws : {2, 4, 8}) {
      SCOPED_TRACE(std::string(CodecName(c)) + " ws " + std::to_string(ws));
      EXPECT_TRUE(DataFlagRingFits(c, ws));
      EXPECT_LE(kDataFlagRingRows * DataFlagRowBytes(c, ws), kTwoShotBlockPhaseBytes);
      EXPECT_EQ(DataFlagRowBytes(c, ws), (ws - 1) * ShardWireBytes(c, ws));
      EXPECT_EQ(ShardWireBytes(c, ws) % 16, 0);
      for (int me = 0; me < ws; ++me) {
        std::vector<int> used(ws - 1, 0);
        for (int s = 0; s < ws; ++s) {
          if (s == me) continue;
          const int slot = DataFlagSourceSlot(s, me);
          ASSERT_GE(slot, 0);
          ASSERT_LT(slot, ws - 1);
          ++used[slot];
        }
        for (int n : used) EXPECT_EQ(n, 1) << "rank " << me;
      }
    }
  }
  // Each block's slots per phase are two tile slots, as the flag family's.
  EXPECT_EQ(kTwoShotBlockPhaseBytes, 2 * kTileSlotBytes);
  const TwoShotLayout l = MakeTwoShotLayout(264);
  EXPECT_EQ(l.data2 - l.data1, 264u * kTwoShotBlockPhaseBytes);
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
