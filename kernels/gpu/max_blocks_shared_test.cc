#include "kernels/gpu/max_blocks_shared.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/gpu/two_shot.h"

namespace qr::kernels {
namespace {

TEST(MostRanksPerDeviceTest, CountsTheBusiestDevice) {
  EXPECT_EQ(MostRanksPerDevice({}), 0);
  EXPECT_EQ(MostRanksPerDevice({"0000:1b:00.0", "0000:2c:00.0"}), 1);
  EXPECT_EQ(MostRanksPerDevice({"0000:1b:00.0", "0000:1b:00.0"}), 2);
  EXPECT_EQ(MostRanksPerDevice({"a", "b", "a", "b", "a", "c", "a", "b"}), 4);
  EXPECT_EQ(MostRanksPerDevice(std::vector<std::string>(8, "a")), 8);
}

TEST(SharedGpuMaxBlocksTest, OneRankPerGpuKeepsTheLayoutsCap) {
  for (int layout : {1, 64, 528, kTwoShotMaxLayoutBlocks}) {
    EXPECT_EQ(SharedGpuMaxBlocks(layout, 1), layout);
    EXPECT_EQ(SharedGpuMaxBlocks(layout, 0), layout);
  }
}

// H200: 132 multiprocessors, layout 528 blocks; the FP kernels keep 264
// resident, shared out equally (what LocalGroup ran at world sizes 4 and 8 on
// two GPUs: 132 and 66 blocks per rank).
TEST(SharedGpuMaxBlocksTest, H200SharesTheFpResidency) {
  const int sms = 132;
  const int layout = sms * kTwoShotBlocksPerSm;
  EXPECT_EQ(SharedGpuMaxBlocks(layout, 2), 132);
  EXPECT_EQ(SharedGpuMaxBlocks(layout, 4), 66);
  EXPECT_EQ(SharedGpuMaxBlocks(layout, 8), 33);
}

// Whatever the device, the blocks of all ranks on a GPU fit in what the FP
// kernels keep resident there, and every rank gets at least one block.
TEST(SharedGpuMaxBlocksTest, AllRanksOfAGpuAreResidentTogether) {
  for (int sms = 1; sms <= 400; ++sms) {
    const int layout = std::min(sms * kTwoShotBlocksPerSm, kTwoShotMaxLayoutBlocks);
    for (int ranks = 2; ranks <= kMaxWorldSize; ++ranks) {
      const int cap = SharedGpuMaxBlocks(layout, ranks);
      EXPECT_GE(cap, 1);
      EXPECT_LE(cap, layout);
      if (sms * kTwoShotFpBlocksPerSm >= ranks) {
        EXPECT_LE(cap * ranks, sms * kTwoShotFpBlocksPerSm) << sms << " SMs, " << ranks << " ranks";
      }
    }
  }
}

}  // namespace
}  // namespace qr::kernels
