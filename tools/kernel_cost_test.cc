#include "tools/kernel_cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tests/util/status_matchers.h"

namespace qr::cost {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

TEST(KernelCostOptionsTest, DefaultsAreTwoShotSharedEveryDtypeAndRegime) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({}));
  EXPECT_THAT(o.sizes, ElementsAre(4 * M, 64 * M, 256 * M));
  EXPECT_THAT(o.dtypes, ElementsAre(BenchDType::kFp16, BenchDType::kBf16, BenchDType::kBf16Cast));
  EXPECT_THAT(o.regimes,
              ElementsAre(Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3));
  EXPECT_EQ(o.algorithm, Algorithm::kTwoShot);
  EXPECT_EQ(o.mode, CostMode::kShared);
  EXPECT_EQ(o.launch, CostLaunch::kEager);
  EXPECT_EQ(o.world_size, 2);
  EXPECT_FALSE(o.help);
}

TEST(KernelCostOptionsTest, ReadsEveryFlag) {
  ASSERT_OK_AND_ASSIGN(
      CostOptions o,
      ParseCostArgs({"--sizes",  "64M,1M", "--dtypes", "bf16",           "--regimes",
                     "INT4,FP",  "--mode", "alone",    "--launch=graph", "--world-size",
                     "4",        "--reps", "3",        "--iters",        "9",
                     "--warmup", "0",      "--csv",    "a.csv",          "--json",
                     "a.json"}));
  EXPECT_THAT(o.sizes, ElementsAre(1 * M, 64 * M));  // sorted, as qr-bench sorts
  EXPECT_THAT(o.dtypes, ElementsAre(BenchDType::kBf16));
  EXPECT_THAT(o.regimes, ElementsAre(Codec::kFp, Codec::kInt4));
  EXPECT_EQ(o.mode, CostMode::kAlone);
  EXPECT_EQ(o.launch, CostLaunch::kGraph);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.reps, 3);
  EXPECT_EQ(o.iters, 9);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.csv_path, "a.csv");
  EXPECT_EQ(o.json_path, "a.json");
}

TEST(KernelCostOptionsTest, Int3IsLeftOutAboveWorldSizeTwoUnlessAskedFor) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--world-size", "8"}));
  EXPECT_THAT(o.regimes, ElementsAre(Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4));
  EXPECT_THAT(o.notes, ElementsAre(HasSubstr("INT3")));
  EXPECT_THAT(ParseCostArgs({"--world-size", "8", "--regimes", "INT3"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("INT3")));
}

TEST(KernelCostOptionsTest, OneShotHasItsOwnSizesAndNoCodec) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--algorithm", "one-shot"}));
  EXPECT_THAT(o.sizes, ElementsAre(4 * K, 64 * K, 256 * K, 1 * M, 4 * M));
  EXPECT_THAT(o.regimes, ElementsAre(Codec::kFp));
  // 4 MiB is the one-shot maximum at world size 2, 1 MiB at 8.
  EXPECT_THAT(ParseCostArgs({"--algorithm", "one-shot", "--sizes", "64M"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("at most 4M")));
  EXPECT_THAT(ParseCostArgs({"--algorithm", "one-shot", "--world-size", "8", "--sizes", "2M"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("at most 1M at world size 8")));
  EXPECT_THAT(ParseCostArgs({"--algorithm", "one-shot", "--regimes", "INT4"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--regimes")));
}

TEST(KernelCostOptionsTest, BadInputNamesTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const Case cases[] = {
      {{"--sizes", "3"}, "--sizes"},
      {{"--sizes", "4M,"}, "--sizes"},
      {{"--dtypes", "fp32"}, "fp16, bf16, bf16cast"},
      {{"--regimes", "INT5"}, "FP, INT8"},
      {{"--world-size", "3"}, "--world-size"},
      {{"--algorithm", "three-shot"}, "two-shot, one-shot"},
      {{"--mode", "lonely"}, "shared, alone"},
      {{"--launch", "lazy"}, "eager, graph, eager-threads, graph-threads"},
      {{"--reps", "0"}, "--reps"},
      {{"--launch", "eager-threads", "--stagger", "-1"}, "--stagger"},
      {{"--iters", "-1"}, "--iters"},
      {{"--frobnicate"}, "frobnicate"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseCostArgs(c.args), StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.needle)))
        << c.args[0];
  }
}

TEST(KernelCostOptionsTest, HelpListsTheFlags) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--help"}));
  EXPECT_TRUE(o.help);
  const std::string usage = CostUsage();
  for (const char* flag :
       {"--sizes", "--dtypes", "--regimes", "--algorithm", "--mode", "--launch", "--world-size",
        "--reps", "--iters", "--stagger", "--csv", "--json", "eager-threads", "graph-threads"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
}

TEST(KernelCostOptionsTest, ThreadedLaunchesTakeOneCallPerSampleAndManySamples) {
  for (const char* launch : {"eager-threads", "graph-threads"}) {
    ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--launch", launch}));
    EXPECT_TRUE(LaunchUsesThreads(o.launch)) << launch;
    EXPECT_EQ(CostLaunchName(o.launch), std::string(launch));
    EXPECT_EQ(o.iters, 1) << launch;
    EXPECT_EQ(o.reps, 200) << launch;
    EXPECT_EQ(o.stagger_us, 0) << launch;
  }
  ASSERT_OK_AND_ASSIGN(CostOptions g, ParseCostArgs({"--launch", "graph-threads"}));
  EXPECT_TRUE(LaunchUsesGraphs(g.launch));
  ASSERT_OK_AND_ASSIGN(CostOptions e, ParseCostArgs({"--launch", "eager-threads"}));
  EXPECT_FALSE(LaunchUsesGraphs(e.launch));
  // Given flags win over the threaded defaults.
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--launch", "eager-threads", "--reps", "5",
                                                     "--iters", "3", "--stagger", "20"}));
  EXPECT_EQ(o.reps, 5);
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.stagger_us, 20);
  // The single-thread launches keep their defaults.
  for (const char* launch : {"eager", "graph"}) {
    ASSERT_OK_AND_ASSIGN(CostOptions s, ParseCostArgs({"--launch", launch}));
    EXPECT_FALSE(LaunchUsesThreads(s.launch)) << launch;
    EXPECT_EQ(s.iters, 0) << launch;
    EXPECT_EQ(s.reps, 7) << launch;
  }
}

TEST(KernelCostOptionsTest, ThreadedLaunchesNeedEveryRankAndOnlyTheyStagger) {
  EXPECT_THAT(ParseCostArgs({"--launch", "eager-threads", "--mode", "alone"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--mode shared")));
  EXPECT_THAT(ParseCostArgs({"--launch", "graph", "--stagger", "10"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--stagger")));
  EXPECT_THAT(ParseCostArgs({"--stagger", "0"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--stagger")));
}

TEST(KernelCostVariantTest, AloneNeedsAVariantThatSkipsTheWaits) {
  ASSERT_OK_AND_ASSIGN(CostOptions alone, ParseCostArgs({"--mode", "alone"}));
  EXPECT_OK(CheckVariant(alone, "bare"));
  EXPECT_OK(CheckVariant(alone, "no_waits"));
  EXPECT_THAT(CheckVariant(alone, ""),
              StatusIs(StatusCode::kUnsupported, HasSubstr("the real kernels")));
  EXPECT_THAT(CheckVariant(alone, "no_fences"),
              StatusIs(StatusCode::kUnsupported, HasSubstr("no_fences variant")));
  ASSERT_OK_AND_ASSIGN(CostOptions shared, ParseCostArgs({}));
  for (const char* v : {"", "bare", "no_waits", "no_fences"}) EXPECT_OK(CheckVariant(shared, v));
}

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

TEST(KernelCostBarrierTest, NoThreadLeavesARoundBeforeEveryThreadEnteredIt) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  SpinBarrier barrier(kThreads);
  std::atomic<int> entered{0};
  std::atomic<int> early{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        entered.fetch_add(1);
        barrier.Wait();
        // Every thread entered this round; none can have entered the round
        // after the next (it would have to pass the next Wait alone).
        const int seen = entered.load();
        if (seen < (round + 1) * kThreads || seen > (round + 2) * kThreads) early.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(entered.load(), kThreads * kRounds);
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

TEST(KernelCostPeerStoreTest, DefaultsAreFourSizesFourChunksAndQrBenchsGrid) {
  ASSERT_OK_AND_ASSIGN(CostOptions o, ParseCostArgs({"--peer-store"}));
  EXPECT_TRUE(o.peer_store);
  EXPECT_THAT(o.sizes, ElementsAre(16 * M, 64 * M, 256 * M, 1024 * M));
  EXPECT_THAT(o.peer_tma_chunks, ElementsAre(4 * K, 8 * K, 16 * K, 32 * K));
  EXPECT_THAT(o.peer_blocks, ElementsAre(0));
  EXPECT_EQ(o.world_size, 2);
  ASSERT_OK_AND_ASSIGN(
      CostOptions p, ParseCostArgs({"--peer-store", "--sizes", "1M", "--peer-tma-chunks", "64K,16",
                                    "--peer-blocks", "132,0", "--world-size", "4", "--reps", "3"}));
  EXPECT_THAT(p.sizes, ElementsAre(1 * M));
  EXPECT_THAT(p.peer_tma_chunks, ElementsAre(64 * K, 16));
  EXPECT_THAT(p.peer_blocks, ElementsAre(132, 0));
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.reps, 3);
}

TEST(KernelCostPeerStoreTest, AllReduceFlagsAndBadChunksAreRefused) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const Case cases[] = {
      {{"--peer-store", "--mode", "alone"}, "--mode: --peer-store"},
      {{"--peer-store", "--launch", "graph"}, "--launch: --peer-store"},
      {{"--peer-store", "--algorithm", "one-shot"}, "--algorithm: --peer-store"},
      {{"--peer-store", "--dtypes", "fp16"}, "--dtypes: --peer-store"},
      {{"--peer-store", "--regimes", "FP"}, "--regimes: --peer-store"},
      {{"--peer-store", "--stagger", "5"}, "--stagger: --peer-store"},
      {{"--peer-tma-chunks", "4K"}, "--peer-tma-chunks: only with --peer-store"},
      {{"--peer-blocks", "8"}, "--peer-blocks: only with --peer-store"},
      {{"--peer-store", "--peer-tma-chunks", "4100"}, "TMA chunk '4100' must be a multiple of 16"},
      {{"--peer-store", "--peer-tma-chunks", "128K"}, "from 16 to 64K"},
      {{"--peer-store", "--peer-blocks", "-1"}, "--peer-blocks"},
      {{"--peer-store", "--sizes", "3"}, "--sizes"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseCostArgs(c.args), StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.needle)))
        << c.args.back();
  }
}

TEST(KernelCostPeerStoreTest, CellsPutTheSmStoresBeforeTheirTmaCells) {
  ASSERT_OK_AND_ASSIGN(CostOptions o,
                       ParseCostArgs({"--peer-store", "--sizes", "64M,1M", "--peer-tma-chunks",
                                      "8K,4K", "--peer-blocks", "0,33"}));
  const std::vector<PeerStoreCell> cells = PlanPeerStoreCells(o);
  ASSERT_EQ(cells.size(), 2u * 2u * 3u);
  EXPECT_EQ(cells[0].bytes, 1 * M);
  EXPECT_EQ(cells[0].blocks, 0);
  EXPECT_FALSE(cells[0].method.tma);
  EXPECT_TRUE(cells[1].method.tma);
  EXPECT_EQ(cells[1].method.chunk_bytes, 8 * K);
  EXPECT_EQ(cells[2].method.chunk_bytes, 4 * K);
  EXPECT_EQ(cells[3].blocks, 33);
  EXPECT_FALSE(cells[3].method.tma);
  EXPECT_EQ(cells[6].bytes, 64 * M);
  EXPECT_EQ(PeerStoreGrid(cells[0], 132), 264);
  EXPECT_EQ(PeerStoreGrid(cells[3], 132), 33);
}

TEST(KernelCostPeerStoreTest, TmaCellsAreComparedWithTheSmCellOfTheirSizeAndGrid) {
  const PeerStoreCell sm{64 * M, {false, 0}, 0};
  const PeerStoreCell tma{64 * M, {true, 16 * K}, 0};
  const PeerStoreCell other_grid{64 * M, {true, 16 * K}, 33};
  std::vector<PeerStoreResult> r = {
      SummarizePeerStore(sm, 1, 4, {40.0, 50.0, 60.0}),
      SummarizePeerStore(tma, 1, 4, {50.0, 45.0}),
      SummarizePeerStore(other_grid, 1, 4, {80.0}),
  };
  EXPECT_DOUBLE_EQ(r[0].best_us, 40.0);
  EXPECT_DOUBLE_EQ(r[0].median_us, 50.0);
  EXPECT_NEAR(r[0].gbps, 64.0 * M / 40.0 / 1e3, 1e-9);
  ComparePeerStoreToSm(r);
  EXPECT_DOUBLE_EQ(r[0].vs_sm, 1.0);
  EXPECT_NEAR(r[1].vs_sm, 40.0 / 45.0, 1e-12);
  EXPECT_EQ(r[2].vs_sm, 0);  // no SM cell at 33 blocks
  // Destinations multiply the bytes.
  EXPECT_NEAR(SummarizePeerStore(sm, 3, 4, {40.0}).gbps, 3 * 64.0 * M / 40.0 / 1e3, 1e-9);
  // A failed SM cell compares nothing.
  r[0].error = "launch failed";
  ComparePeerStoreToSm(r);
  EXPECT_EQ(r[1].vs_sm, 0);
}

TEST(KernelCostPeerStoreTest, OutputsSayOneGpuIsNotTheLink) {
  ASSERT_OK_AND_ASSIGN(
      CostOptions o, ParseCostArgs({"--peer-store", "--sizes", "1M", "--peer-tma-chunks", "16K"}));
  CostRun run;
  run.options = o;
  run.gpu = "NVIDIA H200, GPU 0 at 0000:19:00.0";
  run.multiprocessors = 132;
  run.command_line = "qr-kernel-cost --peer-store";
  const std::string banner = PeerStoreBanner(run);
  EXPECT_THAT(banner, HasSubstr("NOT NVLink"));
  EXPECT_THAT(banner, HasSubstr("qr-bench --peer-tma-chunks"));
  EXPECT_THAT(banner, HasSubstr("2 x 132 multiprocessors"));
  std::vector<PeerStoreResult> r = {
      SummarizePeerStore({1 * M, {false, 0}, 0}, 1, 50, {10.0, 12.0}),
      SummarizePeerStore({1 * M, {true, 16 * K}, 0}, 1, 50, {8.0}),
  };
  ComparePeerStoreToSm(r);
  PeerStoreResult failed = SummarizePeerStore({1 * M, {true, 4 * K}, 0}, 1, 50, {});
  failed.error = "chunk_bytes, bad";
  r.push_back(failed);
  EXPECT_THAT(PeerStoreTableHeader(), HasSubstr("vs sm"));
  EXPECT_THAT(PeerStoreTableLine(run, r[0]), HasSubstr("sm"));
  EXPECT_THAT(PeerStoreTableLine(run, r[1]), HasSubstr("tma 16K"));
  EXPECT_THAT(PeerStoreTableLine(run, r[1]), HasSubstr("1.250"));
  EXPECT_THAT(PeerStoreTableLine(run, r[1]), HasSubstr("264"));
  EXPECT_THAT(PeerStoreTableLine(run, r[2]), HasSubstr("FAILED: chunk_bytes, bad"));
  const std::string header = PeerStoreCsvHeader();
  const auto commas = [](const std::string& line) {
    return std::count(line.begin(), line.end(), ',');
  };
  for (const PeerStoreResult& x : r) EXPECT_EQ(commas(PeerStoreCsvLine(run, x)), commas(header));
  EXPECT_EQ(PeerStoreCsvLine(run, r[1]),
            "peer-store,1048576,1,tma,16384,264,50,1,8.000,8.000,131.07,1.2500,\n");
  EXPECT_THAT(PeerStoreCsvLine(run, r[2]), HasSubstr(",chunk_bytes; bad\n"));
  const auto j = nlohmann::json::parse(PeerStoreJson(run, r));
  EXPECT_THAT(j["run"]["what"].get<std::string>(), HasSubstr("not NVLink"));
  EXPECT_EQ(j["run"]["multiprocessors"], 132);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][1]["method"], "tma");
  EXPECT_EQ(j["results"][1]["tma_chunk_bytes"], 16 * K);
  EXPECT_EQ(j["results"][1]["blocks"], 264);
  EXPECT_DOUBLE_EQ(j["results"][1]["vs_sm"].get<double>(), 1.25);
  EXPECT_EQ(j["results"][2]["error"], "chunk_bytes, bad");
  EXPECT_FALSE(j["results"][2].contains("best_us"));
}

TEST(KernelCostPeerStoreTest, HelpListsThePeerStoreFlags) {
  const std::string usage = CostUsage();
  for (const char* flag : {"--peer-store", "--peer-tma-chunks", "--peer-blocks"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
}

}  // namespace
}  // namespace qr::cost
