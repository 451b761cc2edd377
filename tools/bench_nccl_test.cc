#include "tools/bench_nccl.h"

#include <gtest/gtest.h>

namespace qr::bench {
namespace {

TEST(BenchNcclTest, VersionCodesInBothEncodings) {
  EXPECT_EQ(NcclVersionName(22803), "2.28.3");
  EXPECT_EQ(NcclVersionName(22700), "2.27.0");
  EXPECT_EQ(NcclVersionName(2708), "2.7.8");  // before 2.9: X*1000 + Y*100 + Z
  EXPECT_EQ(NcclVersionName(0), "unknown");
}

TEST(BenchNcclTest, TheSymmetricBaselineNeeds227AndItsEntryPoints) {
  EXPECT_EQ(NcclSymmetricSkipReason(22803, true), "");
  EXPECT_EQ(NcclSymmetricSkipReason(22700, true), "");
  EXPECT_EQ(NcclSymmetricSkipReason(22605, true), "skipped: needs NCCL >= 2.27.0 (this is 2.26.5)");
  EXPECT_EQ(NcclSymmetricSkipReason(2708, true), "skipped: needs NCCL >= 2.27.0 (this is 2.7.8)");
  EXPECT_EQ(NcclSymmetricSkipReason(0, true), "skipped: needs NCCL >= 2.27.0 (this is unknown)");
  EXPECT_NE(NcclSymmetricSkipReason(22803, false).find("no ncclMemAlloc/ncclCommWindowRegister"),
            std::string::npos);
}

}  // namespace
}  // namespace qr::bench
