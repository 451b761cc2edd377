#include "tools/bench_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/util/status_matchers.h"

namespace qr::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

size_t Count(const std::vector<BenchCell>& cells, BenchAlgo algo, BenchMode mode) {
  return std::count_if(cells.begin(), cells.end(),
                       [&](const BenchCell& c) { return c.algo == algo && c.mode == mode; });
}

TEST(BenchPlanTest, DefaultPlanHasEveryCellOnceInRunOrder) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({}));
  const auto cells = PlanCells(o, /*one_shot_max_bytes=*/M);
  // 11 sizes, 9 of them <= 64M timed eagerly; one-shot at the 5 sizes <= 1M;
  // NCCL for fp16 and bf16 only (bf16cast reuses bf16's).
  EXPECT_EQ(Count(cells, BenchAlgo::kTwoShot, BenchMode::kGraph), 11u * 3 * 5);
  EXPECT_EQ(Count(cells, BenchAlgo::kTwoShot, BenchMode::kEager), 9u * 3 * 5);
  EXPECT_EQ(Count(cells, BenchAlgo::kOneShot, BenchMode::kGraph), 5u * 3);
  EXPECT_EQ(Count(cells, BenchAlgo::kOneShot, BenchMode::kEager), 5u * 3);
  EXPECT_EQ(Count(cells, BenchAlgo::kNccl, BenchMode::kGraph), 11u * 2);
  EXPECT_EQ(Count(cells, BenchAlgo::kNccl, BenchMode::kEager), 9u * 2);
  EXPECT_EQ(cells.size(), 370u);
  for (size_t i = 1; i < cells.size(); ++i) EXPECT_LE(cells[i - 1].bytes, cells[i].bytes);
  for (const BenchCell& c : cells) {
    EXPECT_FALSE(c.algo == BenchAlgo::kNccl && c.dtype == BenchDType::kBf16Cast);
    EXPECT_FALSE(c.mode == BenchMode::kEager && c.bytes > 64 * M);
    EXPECT_FALSE(c.algo == BenchAlgo::kOneShot && c.bytes > M);
    EXPECT_NE(c.algo, BenchAlgo::kPolicy);
  }
  EXPECT_EQ(CellLabel(cells.back()), "1G bf16cast graph two-shot INT3");
}

TEST(BenchPlanTest, Bf16CastTimesItsOwnNcclWhenBf16IsNotSwept) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o,
                       ParseBenchArgs({"--dtypes", "bf16cast", "--sizes", "1M", "--modes", "graph",
                                       "--algos", "two-shot", "--regimes", "FP"}));
  const auto cells = PlanCells(o, M);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].algo, BenchAlgo::kNccl);
  EXPECT_EQ(cells[0].dtype, BenchDType::kBf16Cast);
  EXPECT_EQ(CellLabel(cells[1]), "1M bf16cast graph two-shot FP");
}

TEST(BenchPlanTest, PerGpuTimesNcclSymmetricAfterNcclAndAtWorldSizeOneOnlyBaselines) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o,
                       ParseBenchArgs({"--launch", "per-gpu", "--sizes", "4K", "--modes", "graph",
                                       "--dtypes", "fp16,bf16cast", "--regimes", "FP"}));
  std::vector<std::string> labels;
  for (const BenchCell& c : PlanCells(o, M)) labels.push_back(CellLabel(c));
  EXPECT_THAT(labels, ElementsAre("4K fp16 graph nccl", "4K fp16 graph nccl-symm",
                                  "4K fp16 graph one-shot", "4K fp16 graph two-shot FP",
                                  "4K bf16cast graph nccl", "4K bf16cast graph nccl-symm",
                                  "4K bf16cast graph one-shot", "4K bf16cast graph two-shot FP"));
  ASSERT_OK_AND_ASSIGN(BenchOptions one, ParseBenchArgs({"--launch", "per-gpu", "--world-size", "1",
                                                         "--sizes", "4K", "--dtypes", "fp16"}));
  labels.clear();
  for (const BenchCell& c : PlanCells(one, M)) labels.push_back(CellLabel(c));
  EXPECT_THAT(labels, ElementsAre("4K fp16 graph nccl", "4K fp16 graph nccl-symm",
                                  "4K fp16 eager nccl", "4K fp16 eager nccl-symm"));
}

TEST(BenchPlanTest, ANcclSymmetricFailureDropsOnlyThatBaseline) {
  SweepGuard g(/*have_nccl=*/true, /*have_nccl_symm=*/true);
  const BenchCell symm{4 * K, BenchDType::kFp16, BenchMode::kGraph, BenchAlgo::kNcclSymm,
                       Codec::kFp};
  const BenchCell nccl{4 * K, BenchDType::kFp16, BenchMode::kGraph, BenchAlgo::kNccl, Codec::kFp};
  EXPECT_TRUE(g.ShouldTime(symm));
  const SweepGuard::Verdict v = g.OnFailure(symm, /*poisoned=*/false);
  EXPECT_THAT(v.failures, ElementsAre(HasSubstr("NCCL symmetric baseline dropped")));
  EXPECT_FALSE(g.ShouldTime(symm));
  EXPECT_TRUE(g.ShouldTime(nccl));
  EXPECT_FALSE(SweepGuard(true).ShouldTime(symm));  // never set up
}

TEST(BenchPlanTest, DefaultRunFitsTheDeviceBudget) {
  // The device tool allows 600 s per command; the suite's bench part must
  // stay well under it.
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({}));
  const double s = EstimateRunSeconds(PlanCells(o, M), o);
  EXPECT_GT(s, 370 * 3 * kBatchTargetMs / 1e3);  // 3 timed batches per cell
  EXPECT_LT(s, 240.0);
  ASSERT_OK_AND_ASSIGN(BenchOptions q, ParseBenchArgs({"--quick"}));
  EXPECT_LT(EstimateRunSeconds(PlanCells(q, M), q), s / 2);
}

TEST(BenchPlanTest, BatchSizing) {
  EXPECT_EQ(CallsPerBatch(4 * K), 50);
  EXPECT_EQ(CallsPerBatch(16 * M), 16);
  EXPECT_EQ(CallsPerBatch(256 * M), 2);
  EXPECT_EQ(CallsPerBatch(1024 * M), 2);
  EXPECT_EQ(RepsForTarget(0.5), 40);
  EXPECT_EQ(RepsForTarget(0.01), kMaxReps);
  EXPECT_EQ(RepsForTarget(0.0), kMaxReps);
  EXPECT_EQ(RepsForTarget(15.0), kMinReps);
  EXPECT_GT(EstimateCellSeconds(
                {1024 * M, BenchDType::kFp16, BenchMode::kGraph, BenchAlgo::kTwoShot, Codec::kFp}),
            EstimateCellSeconds(
                {4 * K, BenchDType::kFp16, BenchMode::kGraph, BenchAlgo::kTwoShot, Codec::kFp}));
}

TEST(BenchPlanTest, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(Median({7.0}), 7.0);
  EXPECT_EQ(Median({}), 0.0);
}

BenchCell Cell(BenchAlgo algo) {
  return {M, BenchDType::kFp16, BenchMode::kGraph, algo,
          algo == BenchAlgo::kTwoShot ? Codec::kInt4 : Codec::kFp};
}

TEST(SweepGuardTest, NcclIsTimedOnlyWhenLoadedAndDroppedAfterItsFirstFailure) {
  EXPECT_FALSE(SweepGuard(false).ShouldTime(Cell(BenchAlgo::kNccl)));
  SweepGuard g(true);
  EXPECT_TRUE(g.ShouldTime(Cell(BenchAlgo::kNccl)));
  const SweepGuard::Verdict v = g.OnFailure(Cell(BenchAlgo::kNccl), /*poisoned=*/false);
  EXPECT_THAT(v.failures, ElementsAre(HasSubstr("NCCL baseline dropped")));
  EXPECT_FALSE(v.rebuild_group || v.stop);
  EXPECT_FALSE(g.nccl());
  EXPECT_FALSE(g.ShouldTime(Cell(BenchAlgo::kNccl)));
  EXPECT_TRUE(g.ShouldTime(Cell(BenchAlgo::kOneShot)));
  EXPECT_TRUE(g.ShouldTime(Cell(BenchAlgo::kTwoShot)));
}

TEST(SweepGuardTest, AOneShotLaunchErrorDropsOneShotButATimeoutRebuildsInstead) {
  SweepGuard timeout(false);
  const SweepGuard::Verdict t = timeout.OnFailure(Cell(BenchAlgo::kOneShot), /*poisoned=*/true);
  EXPECT_TRUE(t.failures.empty());
  EXPECT_TRUE(t.rebuild_group);
  EXPECT_TRUE(timeout.ShouldTime(Cell(BenchAlgo::kOneShot)));

  SweepGuard launch(false);
  const SweepGuard::Verdict l = launch.OnFailure(Cell(BenchAlgo::kOneShot), /*poisoned=*/false);
  EXPECT_THAT(l.failures, ElementsAre(HasSubstr("one-shot skipped")));
  EXPECT_FALSE(l.rebuild_group);
  EXPECT_FALSE(launch.ShouldTime(Cell(BenchAlgo::kOneShot)));
  EXPECT_TRUE(launch.ShouldTime(Cell(BenchAlgo::kTwoShot)));
}

TEST(SweepGuardTest, TwoShotFailuresSkipOnlyTheCellAndPoisonedGroupsAreRebuiltAFewTimes) {
  SweepGuard g(true);
  const SweepGuard::Verdict plain = g.OnFailure(Cell(BenchAlgo::kTwoShot), /*poisoned=*/false);
  EXPECT_TRUE(plain.failures.empty());
  EXPECT_FALSE(plain.rebuild_group || plain.stop);
  for (int i = 0; i < kMaxGroupRebuilds; ++i) {
    const SweepGuard::Verdict v = g.OnFailure(Cell(BenchAlgo::kTwoShot), /*poisoned=*/true);
    EXPECT_TRUE(v.rebuild_group) << i;
    EXPECT_FALSE(v.stop) << i;
  }
  const SweepGuard::Verdict last = g.OnFailure(Cell(BenchAlgo::kTwoShot), /*poisoned=*/true);
  EXPECT_TRUE(last.stop);
  EXPECT_FALSE(last.rebuild_group);
  EXPECT_TRUE(g.nccl());
}

}  // namespace
}  // namespace qr::bench
