#include "tools/kernel_cost_collectives.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/util/status_matchers.h"

namespace qr::cost {
namespace {

using ::qr::testing::StatusIs;

TEST(KernelCostCollectivesTest, DefaultsCoverSizesDtypesAndRegimes) {
  auto o = ParseCollectiveCostArgs(Collective::kReduceScatter, {});
  ASSERT_OK(o.status());
  EXPECT_EQ(o->kind, Collective::kReduceScatter);
  EXPECT_EQ(o->sizes, (std::vector<size_t>{1 << 20, 16 << 20, 64 << 20, 256 << 20}));
  EXPECT_EQ(o->regimes, (std::vector<Codec>{Codec::kFp, Codec::kInt8, Codec::kInt4}));
  EXPECT_EQ(o->dtypes.size(), 2u);
  EXPECT_EQ(PlanCollectiveCells(*o).size(), 4u * 2 * 3);
}

TEST(KernelCostCollectivesTest, CellsHoldThePerRankCountInOrder) {
  auto o = ParseCollectiveCostArgs(
      Collective::kAllGather, {"--sizes", "64M,1M,1M", "--dtypes", "bf16cast", "--regimes", "INT6",
                               "--world-size", "8", "--reps", "3", "--iters", "5", "--csv", "x"});
  ASSERT_OK(o.status());
  EXPECT_EQ(o->world_size, 8);
  EXPECT_EQ(o->reps, 3);
  EXPECT_EQ(o->iters, 5);
  EXPECT_EQ(o->csv_path, "x");
  const auto cells = PlanCollectiveCells(*o);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].bytes, size_t{1} << 20);
  EXPECT_EQ(cells[0].count, (size_t{1} << 20) / 2 / 8);
  EXPECT_EQ(cells[1].bytes, size_t{64} << 20);
  EXPECT_EQ(cells[1].dtype, WorkFormat::kBf16Cast);
  EXPECT_EQ(cells[1].codec, Codec::kInt6);
}

TEST(KernelCostCollectivesTest, RefusesWhatTheWorldSizeCannotRun) {
  // Shards of 16 bytes: the whole message is a multiple of 16 x world size.
  EXPECT_THAT(
      ParseCollectiveCostArgs(Collective::kReduceScatter, {"--sizes", "48", "--world-size", "4"})
          .status(),
      StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(
      ParseCollectiveCostArgs(Collective::kReduceScatter, {"--sizes", "64", "--world-size", "4"})
          .status());
  EXPECT_THAT(
      ParseCollectiveCostArgs(Collective::kAllGather, {"--regimes", "INT3", "--world-size", "4"})
          .status(),
      StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCollectiveCostArgs(Collective::kAllGather, {"--dtypes", "fp32"}).status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCollectiveCostArgs(Collective::kAllReduce, {}).status(),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(KernelCostCollectivesTest, OneShotTakesSizesUpToTheOneShotRegion) {
  auto o = ParseCollectiveCostArgs(Collective::kAllGather, {"--one-shot", "--world-size", "8"});
  ASSERT_OK(o.status());
  EXPECT_TRUE(o->one_shot);
  EXPECT_EQ(o->sizes, (std::vector<size_t>{4 << 10, 64 << 10, 1 << 20}));
  EXPECT_FALSE(ParseCollectiveCostArgs(Collective::kAllGather, {}).value().one_shot);
  // The region holds 8 MiB / world size per source.
  EXPECT_OK(ParseCollectiveCostArgs(Collective::kReduceScatter,
                                    {"--one-shot", "--world-size", "2", "--sizes", "4M"})
                .status());
  EXPECT_THAT(ParseCollectiveCostArgs(Collective::kReduceScatter,
                                      {"--one-shot", "--world-size", "4", "--sizes", "4M"})
                  .status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(
      ParseCollectiveCostArgs(Collective::kReduceScatter, {"--world-size", "4", "--sizes", "4M"})
          .status());
}

TEST(KernelCostCollectivesTest, LinesNameTheKindAndTheRatio) {
  CollectiveCostResult r;
  r.cell = {size_t{16} << 20, (size_t{16} << 20) / 4, WorkFormat::kBf16, Codec::kInt4};
  r.all_reduce_us = 100;
  r.collective_us = 52.5;
  EXPECT_NE(CollectiveTableHeader(Collective::kAllGather).find("all-gather_us"), std::string::npos);
  EXPECT_NE(CollectiveTableLine(r).find("0.525"), std::string::npos);
  EXPECT_EQ(CollectiveCsvLine(Collective::kReduceScatter, false, r),
            "reduce-scatter,two-shot,16777216,4194304,bf16,INT4,100.000,52.500,\n");
  r.error = "a, b";
  EXPECT_EQ(CollectiveCsvLine(Collective::kAllGather, true, r),
            "all-gather,one-shot,16777216,4194304,bf16,INT4,100.000,52.500,a; b\n");
  EXPECT_NE(CollectiveTableLine(r).find("FAILED: a, b"), std::string::npos);
}

}  // namespace
}  // namespace qr::cost
