#include "tools/kernel_cost_fused.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/geometry.h"
#include "tests/util/status_matchers.h"

namespace qr::cost {
namespace {

using ::qr::testing::StatusIs;

TEST(KernelCostFusedTest, DefaultsCoverTheIssuesGrid) {
  auto o = ParseFusedCostArgs({});
  ASSERT_OK(o.status());
  EXPECT_EQ(o->tokens, (std::vector<size_t>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(o->hiddens, (std::vector<size_t>{4096, 8192}));
  EXPECT_EQ(o->dtypes.size(), 2u);
  EXPECT_EQ(o->world_size, 2);
  EXPECT_TRUE(o->gemm);
  EXPECT_FALSE(o->two_shot);
  EXPECT_EQ(o->gemm_rounds, 4096);
  EXPECT_EQ(PlanFusedCells(*o).size(), 9u * 2 * 2);
}

TEST(KernelCostFusedTest, FlagsAreParsedAndCellsOrdered) {
  auto o = ParseFusedCostArgs({"--tokens", "256,1,16,1", "--hiddens", "8192", "--dtypes", "bf16",
                               "--world-size", "8", "--reps", "3", "--iters", "20", "--csv",
                               "x.csv", "--gemm-rounds", "100", "--no-gemm"});
  ASSERT_OK(o.status());
  EXPECT_EQ(o->tokens, (std::vector<size_t>{1, 16, 256}));
  EXPECT_EQ(o->world_size, 8);
  EXPECT_EQ(o->reps, 3);
  EXPECT_EQ(o->iters, 20);
  EXPECT_EQ(o->csv_path, "x.csv");
  EXPECT_EQ(o->gemm_rounds, 100);
  EXPECT_FALSE(o->gemm);
  const auto cells = PlanFusedCells(*o);
  ASSERT_EQ(cells.size(), 3u);
  EXPECT_EQ(cells[0].tokens, 1u);
  EXPECT_EQ(cells[2].tokens, 256u);
  EXPECT_EQ(cells[0].dtype, bench::BenchDType::kBf16);
  // 256 x 8192 fp16 is 4 MiB: above world size 8's one-shot region share.
  EXPECT_EQ(cells[0].algorithm, Algorithm::kOneShot);
  EXPECT_EQ(cells[2].algorithm, 256 * 8192 * 2 <= kernels::OneShotMaxBytes(8)
                                    ? Algorithm::kOneShot
                                    : Algorithm::kTwoShot);
}

// --two-shot: every cell two-shot, also those the one-shot region holds.
TEST(KernelCostFusedTest, TwoShotMakesEveryCellTwoShot) {
  auto o = ParseFusedCostArgs({"--tokens", "1,8", "--hiddens", "4096", "--two-shot"});
  ASSERT_OK(o.status());
  EXPECT_TRUE(o->two_shot);
  const auto cells = PlanFusedCells(*o);
  ASSERT_EQ(cells.size(), 4u);
  for (const auto& c : cells) EXPECT_EQ(c.algorithm, Algorithm::kTwoShot) << c.tokens;
  o->two_shot = false;
  EXPECT_EQ(PlanFusedCells(*o)[0].algorithm, Algorithm::kOneShot);
}

// --mode alone times rank 0's kernels only (its GEMM variants too: the
// programmatic launch's gain without peers sharing the GPU), no row-split
// form, and only a binary whose kernels skip the waits can run it.
TEST(KernelCostFusedTest, AloneModeAndFormFlags) {
  auto o = ParseFusedCostArgs({});
  ASSERT_OK(o.status());
  EXPECT_FALSE(o->alone);
  EXPECT_FALSE(o->fp8);
  EXPECT_EQ(o->form, kernels::FusedRowForm::kPolicy);
  EXPECT_OK(CheckFusedVariant(*o, ""));
  EXPECT_TRUE(ParseFusedCostArgs({"--fp8"})->fp8);
  o = ParseFusedCostArgs({"--mode", "alone", "--form", "lane"});
  ASSERT_OK(o.status());
  EXPECT_TRUE(o->alone);
  EXPECT_TRUE(o->gemm);
  EXPECT_FALSE(ParseFusedCostArgs({"--mode", "alone", "--no-gemm"})->gemm);
  EXPECT_EQ(o->form, kernels::FusedRowForm::kLaneThreads);
  EXPECT_OK(CheckFusedVariant(*o, "no_waits"));
  EXPECT_OK(CheckFusedVariant(*o, "bare"));
  EXPECT_THAT(CheckFusedVariant(*o, ""), StatusIs(StatusCode::kUnsupported));
  EXPECT_THAT(CheckFusedVariant(*o, "no_fences"), StatusIs(StatusCode::kUnsupported));
  o = ParseFusedCostArgs({"--form", "chunk", "--mode", "shared"});
  ASSERT_OK(o.status());
  EXPECT_EQ(o->form, kernels::FusedRowForm::kChunkThreads);
  EXPECT_FALSE(o->alone);
  const auto invalid = StatusIs(StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseFusedCostArgs({"--mode", "alone", "--two-shot"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--mode", "lonely"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--form", "wide"}).status(), invalid);
}

TEST(KernelCostFusedTest, UsageNamesTheToolAndThePlacement) {
  EXPECT_EQ(FusedCostUsage().rfind("qr-kernel-cost --fused [--tokens", 0), 0u);
  EXPECT_NE(FusedCostUsage().find("every rank on\n  GPU 0"), std::string::npos);
  const std::string bench = FusedCostUsage("qr-bench --fused", false);
  EXPECT_EQ(bench.rfind("qr-bench --fused [--tokens", 0), 0u);
  EXPECT_NE(bench.find("one GPU per\n  rank"), std::string::npos);
}

TEST(KernelCostFusedTest, BadFlagsAreRefused) {
  const auto invalid = StatusIs(StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseFusedCostArgs({"--hiddens", "100"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--tokens", "0"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--dtypes", "bf16cast"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--world-size", "3"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--bogus"}).status(), invalid);
  EXPECT_THAT(ParseFusedCostArgs({"--gemm-rounds", "0"}).status(), invalid);
}

TEST(KernelCostFusedTest, OutputsCarryTheRatioAndTheDifference) {
  FusedCostResult r;
  r.cell = {8, 4096, bench::BenchDType::kFp16, Algorithm::kOneShot};
  r.all_reduce_us = 10;
  r.unfused_us = 16;
  r.fused_us = 12;
  r.fused_two_launch_us = 15;
  r.fused_one_launch_us = 11.5;
  r.gemm_us = 20;
  r.gemm_fused_us = 33;
  r.gemm_fused_pdl_us = 29.5;
  const std::string line = FusedTableLine(r);
  EXPECT_NE(line.find("0.750"), std::string::npos) << line;
  EXPECT_NE(line.find(" 2.00"), std::string::npos) << line;
  EXPECT_NE(line.find(" 3.50"), std::string::npos) << line;  // the PDL gain
  EXPECT_NE(line.find(" 11.50 "), std::string::npos) << line;
  EXPECT_EQ(FusedCsvLine(r),
            "8,4096,fp16,one-shot,10.000,16.000,12.000,15.000,11.500,20.000,33.000,29.500,\n");
  // A cell the one-launch kernel does not take shows "-", not a time.
  r.fused_one_launch_us = 0;
  EXPECT_NE(FusedTableLine(r).find(" - "), std::string::npos) << FusedTableLine(r);
  r.error = "a, b";
  EXPECT_EQ(FusedCsvLine(r),
            "8,4096,fp16,one-shot,10.000,16.000,12.000,15.000,0.000,20.000,33.000,29.500,a; b\n");
  EXPECT_NE(FusedTableLine(r).find("FAILED: a, b"), std::string::npos);
}

}  // namespace
}  // namespace qr::cost
