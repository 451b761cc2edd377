#include "common/limits.h"

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;

TEST(LimitsTest, WorldSizesAreTwoFourEight) {
  for (int ws : {2, 4, 8}) {
    EXPECT_OK(ValidateWorldSize(ws));
    EXPECT_TRUE(IsSupportedWorldSize(ws));
  }
  for (int ws : {-1, 0, 1, 3, 6, 16}) {
    EXPECT_THAT(ValidateWorldSize(ws), StatusIs(StatusCode::kInvalidArgument));
    EXPECT_FALSE(IsSupportedWorldSize(ws)) << ws;
    EXPECT_EQ(WorldSizeIndex(ws), -1) << ws;
  }
  EXPECT_EQ(WorldSizeIndex(2), 0);
  EXPECT_EQ(WorldSizeIndex(4), 1);
  EXPECT_EQ(WorldSizeIndex(8), 2);
  EXPECT_EQ(kMaxWorldSize, 8);
}

TEST(LimitsTest, MessagesAreWholeSixteenByteUnits) {
  EXPECT_TRUE(IsWholeMessageUnits(0));
  EXPECT_TRUE(IsWholeMessageUnits(16));
  EXPECT_TRUE(IsWholeMessageUnits(uint64_t{1} << 40));
  EXPECT_FALSE(IsWholeMessageUnits(8));
  EXPECT_FALSE(IsWholeMessageUnits(24));
}

TEST(LimitsTest, TimeoutsStopAtOneDay) { EXPECT_EQ(kMaxTimeoutMs, 86400000); }

}  // namespace
}  // namespace qr
