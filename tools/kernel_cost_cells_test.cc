#include "tools/kernel_cost_cells.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/util/status_matchers.h"
#include "tools/kernel_cost_options.h"

namespace qr::cost {
namespace {

using ::testing::ElementsAre;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

TEST(KernelCostPlanTest, CellsInSizeDtypeRegimeOrder) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--sizes", "4M,1M", "--dtypes", "fp16,bf16",
                                                     "--regimes", "FP,INT4"}));
  const auto cells = PlanCostCells(o);
  ASSERT_EQ(cells.size(), 8u);
  EXPECT_EQ(cells[0].bytes, 1 * M);
  EXPECT_EQ(cells[0].dtype, BenchDType::kFp16);
  EXPECT_EQ(cells[0].codec, Codec::kFp);
  EXPECT_EQ(cells[1].codec, Codec::kInt4);
  EXPECT_EQ(cells[2].dtype, BenchDType::kBf16);
  EXPECT_EQ(cells[4].bytes, 4 * M);

  ASSERT_OK_AND_ASSIGN(CostOptions one, ParseCostArgs({"--algorithm", "one-shot", "--sizes",
                                                       "4K,1M", "--dtypes", "fp16,bf16"}));
  EXPECT_EQ(PlanCostCells(one).size(), 4u);  // one cell per size and dtype
}

TEST(KernelCostPlanTest, ItersFollowTheFlagOrTheBenchDefault) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({}));
  EXPECT_EQ(ItersFor(o, 4 * M), 50);
  EXPECT_EQ(ItersFor(o, 64 * M), 4);
  EXPECT_EQ(ItersFor(o, 256 * M), 2);
  o.iters = 7;
  EXPECT_EQ(ItersFor(o, 256 * M), 7);
}

TEST(KernelCostResultTest, PercentilesInterpolateBetweenOrderStatistics) {
  EXPECT_EQ(Percentile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.99), 7);
  // Unsorted input; positions q x (n - 1) over 1..5.
  const std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 4.6);
  EXPECT_DOUBLE_EQ(Percentile(v, 1), 5);
  // p50 is the median for even counts too.
  EXPECT_DOUBLE_EQ(Percentile({9, 3, 5, 4}, 0.5), 4.5);
  // 101 samples 0..100: p99 is the 99th; one outlier moves only the top.
  std::vector<double> many;
  for (int i = 0; i <= 100; ++i) many.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(many, 0.99), 99);
  many.back() = 1e6;
  EXPECT_DOUBLE_EQ(Percentile(many, 0.99), 99);
  EXPECT_DOUBLE_EQ(Percentile(many, 0.90), 90);
}

TEST(KernelCostResultTest, SummaryHasTheSpreadAndTheSkew) {
  std::vector<double> samples;
  for (int i = 1; i <= 200; ++i) samples.push_back(i == 137 ? 214.0 : 7.0 + (i % 4));
  const CostResult r =
      Summarize({256 * K, BenchDType::kFp16, Codec::kFp}, 1, samples, {0.5, 2.0, 1.0});
  EXPECT_DOUBLE_EQ(r.best_us, 7);
  EXPECT_DOUBLE_EQ(r.median_us, 9);
  EXPECT_DOUBLE_EQ(r.p90_us, 10);
  EXPECT_DOUBLE_EQ(r.p99_us, 10);
  EXPECT_DOUBLE_EQ(r.max_us, 214);
  EXPECT_DOUBLE_EQ(r.skew_median_us, 1.0);
  EXPECT_DOUBLE_EQ(r.skew_max_us, 2.0);
  const CostResult plain = Summarize({4 * M, BenchDType::kFp16, Codec::kFp}, 50, {3, 4});
  EXPECT_TRUE(plain.skew_us.empty());
  EXPECT_EQ(plain.skew_max_us, 0);
}

TEST(KernelCostResultTest, BestAndMedianOfTheSamples) {
  const CostResult r = Summarize({4 * M, BenchDType::kFp16, Codec::kInt4}, 10, {9, 3, 5, 4});
  EXPECT_DOUBLE_EQ(r.best_us, 3);
  EXPECT_DOUBLE_EQ(r.median_us, 4.5);
  EXPECT_EQ(r.iters, 10);
  EXPECT_THAT(r.samples_us, ElementsAre(9, 3, 5, 4));
  const CostResult none = Summarize({}, 1, {});
  EXPECT_EQ(none.best_us, 0);
}

}  // namespace
}  // namespace qr::cost
