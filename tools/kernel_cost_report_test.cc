#include "tools/kernel_cost_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/kernel_cost_cells.h"
#include "tools/kernel_cost_options.h"

namespace qr::cost {
namespace {

using ::testing::HasSubstr;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

CostRun TestRun(const std::vector<std::string>& args, const std::string& variant) {
  CostRun run;
  run.options = *ParseCostArgs(args);
  run.variant = variant;
  run.gpu = "GPU 0 at 0000:19:00.0";
  run.max_blocks = 264;
  run.command_line = "qr-kernel-cost";
  run.date = "2026-12-01T15:00:00Z";
  return run;
}

TEST(KernelCostOutputTest, BannerSaysTheRanksShareOneGpu) {
  const std::string b = Banner(TestRun({"--mode", "alone"}, "bare"));
  EXPECT_THAT(b, HasSubstr("2 ranks SHARE ONE GPU"));
  EXPECT_THAT(b, HasSubstr("not link measurements"));
  EXPECT_THAT(b, HasSubstr("kernels: bare (timing variant, wrong results)"));
  EXPECT_THAT(b, HasSubstr("mode alone (rank 0's kernel only)"));
  EXPECT_THAT(Banner(TestRun({}, "")), HasSubstr("kernels: real (real kernels)"));
}

TEST(KernelCostOutputTest, CsvHasOneLinePerResultAndEmptyTimesOnFailure) {
  const CostRun run = TestRun({"--mode", "alone", "--launch", "graph"}, "bare");
  CostResult ok = Summarize({64 * M, BenchDType::kFp16, Codec::kInt4}, 4, {60.8, 61.0, 62.0});
  CostResult bad = Summarize({256 * M, BenchDType::kBf16, Codec::kInt3}, 2, {});
  bad.error = "rank 0's kernel gave up (timeout), again\nand again";
  EXPECT_EQ(CostCsvHeader(),
            "algorithm,mode,launch,variant,world_size,bytes,dtype,regime,iters,reps,best_us,"
            "median_us,algbw_gbps,p90_us,p99_us,max_us,stagger_us,skew_median_us,skew_max_us,"
            "error\n");
  EXPECT_EQ(CostCsvLine(run, ok),
            "two-shot,alone,graph,bare,2,67108864,fp16,INT4,4,3,60.800,61.000,1103.76,61.800,"
            "61.980,62.000,0,,,\n");
  EXPECT_EQ(CostCsvLine(run, bad),
            "two-shot,alone,graph,bare,2,268435456,bf16,INT3,2,0,,,,,,,0,,,rank 0's kernel gave up "
            "(timeout); again and again\n");
  const CostRun one = TestRun({"--algorithm", "one-shot"}, "");
  EXPECT_EQ(CostCsvLine(one, Summarize({4 * K, BenchDType::kBf16, Codec::kFp}, 50, {3.0})),
            "one-shot,shared,eager,real,2,4096,bf16,exact,50,1,3.000,3.000,1.37,3.000,3.000,3.000,"
            "0,,,\n");
  const CostRun threads =
      TestRun({"--algorithm", "one-shot", "--launch", "eager-threads", "--stagger", "30"}, "");
  EXPECT_EQ(CostCsvLine(threads, Summarize({16 * K, BenchDType::kFp16, Codec::kFp}, 1, {8, 9, 10},
                                           {0.25, 0.5, 31})),
            "one-shot,shared,eager-threads,real,2,16384,fp16,exact,1,3,8.000,9.000,2.05,9.800,"
            "9.980,10.000,30,0.500,31.000,\n");
}

TEST(KernelCostOutputTest, JsonRecordsTheRunAndEveryResult) {
  const CostRun run = TestRun({}, "");
  CostResult ok = Summarize({4 * M, BenchDType::kFp16, Codec::kFp}, 50, {10, 12});
  CostResult bad = Summarize({4 * M, BenchDType::kFp16, Codec::kInt8}, 50, {});
  bad.error = "boom";
  const auto j = nlohmann::json::parse(CostJson(run, {ok, bad}));
  EXPECT_EQ(j["run"]["variant"], "real");
  EXPECT_EQ(j["run"]["mode"], "shared");
  EXPECT_EQ(j["run"]["max_blocks"], 264);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["best_us"], 10.0);
  EXPECT_EQ(j["results"][0]["median_us"], 11.0);
  EXPECT_EQ(j["results"][0]["regime"], "FP");
  EXPECT_FALSE(j["results"][0].contains("skew_us"));
  EXPECT_FALSE(j["results"][1].contains("best_us"));
  EXPECT_EQ(j["results"][1]["error"], "boom");
  EXPECT_EQ(j["run"]["threads"], false);

  const CostRun threads = TestRun({"--algorithm", "one-shot", "--launch", "graph-threads"}, "");
  const CostResult t =
      Summarize({64 * K, BenchDType::kBf16, Codec::kFp}, 1, {4, 5, 6, 40}, {0.5, 0.5, 1.5, 0.5});
  const auto jt = nlohmann::json::parse(CostJson(threads, {t}));
  EXPECT_EQ(jt["run"]["launch"], "graph-threads");
  EXPECT_EQ(jt["run"]["threads"], true);
  EXPECT_EQ(jt["run"]["reps"], 200);
  EXPECT_EQ(jt["run"]["iters"], 1);
  const auto& row = jt["results"][0];
  EXPECT_EQ(row["median_us"], 5.5);
  EXPECT_EQ(row["max_us"], 40.0);
  EXPECT_DOUBLE_EQ(row["p90_us"].get<double>(), 29.8);
  EXPECT_EQ(row["skew_us"].size(), 4u);
  EXPECT_EQ(row["skew_median_us"], 0.5);
  EXPECT_EQ(row["skew_max_us"], 1.5);
}

TEST(KernelCostOutputTest, TableLineShowsTimesOrTheFailure) {
  const CostRun run = TestRun({}, "");
  CostResult ok = Summarize({64 * M, BenchDType::kBf16Cast, Codec::kInt6}, 4, {100, 101});
  EXPECT_THAT(CostTableLine(run, ok), HasSubstr("64M bf16cast   INT6"));
  EXPECT_THAT(CostTableLine(run, ok), HasSubstr("100.00"));
  ok.error = "boom";
  EXPECT_THAT(CostTableLine(run, ok), HasSubstr("FAILED: boom"));
  EXPECT_THAT(CostTableHeader(run), HasSubstr("median us"));
  EXPECT_THAT(CostTableHeader(run), ::testing::Not(HasSubstr("p99")));

  const CostRun threads = TestRun({"--algorithm", "one-shot", "--launch", "eager-threads"}, "");
  EXPECT_THAT(CostTableHeader(threads), HasSubstr("p50 us    p90 us    p99 us    max us"));
  EXPECT_THAT(CostTableHeader(threads), HasSubstr("skew max"));
  const CostResult t =
      Summarize({16 * K, BenchDType::kFp16, Codec::kFp}, 1, {7, 8, 9, 214}, {0.5, 1, 1, 3});
  EXPECT_THAT(CostTableLine(threads, t),
              HasSubstr("7.00      8.50    152.50    207.85    214.00       1.00       3.00"));
  const std::string banner = Banner(threads);
  EXPECT_THAT(banner, HasSubstr("one host thread per rank"));
  EXPECT_THAT(banner, HasSubstr("200 timed repetitions"));
  EXPECT_THAT(Banner(TestRun(
                  {"--algorithm", "one-shot", "--launch", "eager-threads", "--stagger", "25"}, "")),
              HasSubstr("rank r 25 us x r later"));
}

}  // namespace
}  // namespace qr::cost
