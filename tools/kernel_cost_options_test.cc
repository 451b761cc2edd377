#include "tools/kernel_cost_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
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

TEST(KernelCostPeerStoreTest, HelpListsThePeerStoreFlags) {
  const std::string usage = CostUsage();
  for (const char* flag : {"--peer-store", "--peer-tma-chunks", "--peer-blocks"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
}

}  // namespace
}  // namespace qr::cost
