// The one-shot reduce-scatter / all-gather wire (one_shot_collective_wire.h):
// the all-gather's words carry every 16-bit value back bit for bit with no
// zero lane (zero means "not arrived"), its wire atoms cover the chunk once,
// and every call the policy can send one-shot (whole message within the
// one-shot region) fits a source's part of the region.
#include "kernels/gpu/one_shot_collective_wire.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/geometry.h"
#include "kernels/gpu/collective_request.h"
#include "kernels/types.h"

namespace qr::kernels {
namespace {

TEST(OneShotCollectiveWireTest, GatherWordsCarryEveryValueWithNoZeroLane) {
  for (uint32_t v = 0; v <= 0xFFFFu; ++v) {
    const uint32_t w = GatherWireOfValue(v);
    ASSERT_NE(w & 0xFFFFu, 0u) << v;
    ASSERT_NE(w >> 16, 0u) << v;
    ASSERT_EQ(GatherValueOfWire(w), v) << v;
  }
  // Only the low 16 bits of the argument are a value.
  EXPECT_EQ(GatherValueOfWire(GatherWireOfValue(0x1ABCDu)), 0xABCDu);
}

TEST(OneShotCollectiveWireTest, GatherWireAtomsCoverTheChunkOnce) {
  for (int64_t count : {8, 16, 1000, 4096}) {
    const int64_t bytes = count * 2;
    std::vector<int> hits(static_cast<size_t>(bytes), 0);
    const int64_t wire_atoms = OneShotCollectiveWireBytes(Collective::kAllGather, count) / 16;
    ASSERT_EQ(wire_atoms, 2 * bytes / 16);
    for (int64_t a = 0; a < wire_atoms; ++a) {
      const int64_t off = GatherChunkByteOffset(a);
      ASSERT_LE(off + 8, bytes) << a;
      // Both halves of an input atom come from the same input atom.
      ASSERT_EQ(off / 16, a / 2);
      for (int64_t i = 0; i < 8; ++i) ++hits[static_cast<size_t>(off + i)];
    }
    for (int64_t i = 0; i < bytes; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
  }
}

TEST(OneShotCollectiveWireTest, WireBytesPerCollective) {
  EXPECT_EQ(OneShotCollectiveWireBytes(Collective::kReduceScatter, 1000), 2000);
  EXPECT_EQ(OneShotCollectiveWireBytes(Collective::kAllGather, 1000), 4000);
  EXPECT_EQ(OneShotCollectiveWireBytes(Collective::kAllReduce, 1000), 0);
  EXPECT_FALSE(OneShotCollectiveFits(Collective::kAllReduce, 8, 2));
  EXPECT_FALSE(OneShotCollectiveFits(Collective::kAllReduceResidualRmsNorm, 8, 2));
}

TEST(OneShotCollectiveWireTest, EveryWholeMessageOfTheRegionFits) {
  for (int ws : {2, 4, 8}) {
    SCOPED_TRACE(ws);
    // The largest whole message a one-shot all-reduce takes, as ws chunks.
    const int64_t count = OneShotMaxElems(ws) / ws;
    for (Collective c : {Collective::kReduceScatter, Collective::kAllGather}) {
      EXPECT_TRUE(OneShotCollectiveFits(c, count, ws));
      EXPECT_TRUE(OneShotCollectiveFits(c, 8, ws));
      EXPECT_FALSE(OneShotCollectiveFits(c, 0, ws));
    }
    // The limits themselves: a reduce-scatter's chunk may fill a source's
    // part, an all-gather's (twice the bytes on the wire) half of it.
    EXPECT_TRUE(OneShotCollectiveFits(Collective::kReduceScatter, OneShotMaxElems(ws), ws));
    EXPECT_FALSE(OneShotCollectiveFits(Collective::kReduceScatter, OneShotMaxElems(ws) + 8, ws));
    EXPECT_TRUE(OneShotCollectiveFits(Collective::kAllGather, OneShotMaxElems(ws) / 2, ws));
    EXPECT_FALSE(OneShotCollectiveFits(Collective::kAllGather, OneShotMaxElems(ws) / 2 + 8, ws));
  }
}

TEST(CollectiveRequestTest, OneShotKernelOnlyForAOneShotChoiceThatFits) {
  constexpr auto kRs = Collective::kReduceScatter;
  constexpr auto kAg = Collective::kAllGather;
  static_assert(CollectiveRunsOneShot(kRs, Algorithm::kOneShot, 8, 2));
  EXPECT_TRUE(CollectiveRunsOneShot(kAg, Algorithm::kOneShot, 1000, 8));
  EXPECT_FALSE(CollectiveRunsOneShot(kRs, Algorithm::kTwoShot, 8, 2));
  EXPECT_FALSE(CollectiveRunsOneShot(kAg, Algorithm::kTwoShot, 8, 2));
  // A one-shot choice too large for the region runs the FP phase kernel.
  EXPECT_FALSE(CollectiveRunsOneShot(kAg, Algorithm::kOneShot, OneShotMaxElems(4), 4));
  EXPECT_FALSE(CollectiveRunsOneShot(kRs, Algorithm::kOneShot, 0, 4));
  EXPECT_FALSE(CollectiveRunsOneShot(Collective::kAllReduce, Algorithm::kOneShot, 8, 2));
}

}  // namespace
}  // namespace qr::kernels
