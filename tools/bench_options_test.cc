#include "tools/bench_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr::bench {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

TEST(BenchOptionsTest, DefaultsAreTheFullSweep) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({}));
  EXPECT_THAT(o.sizes, ElementsAre(4 * K, 16 * K, 64 * K, 256 * K, M, 2 * M, 4 * M, 16 * M, 64 * M,
                                   256 * M, 1024 * M));
  EXPECT_THAT(o.regimes,
              ElementsAre(Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3));
  EXPECT_THAT(o.dtypes, ElementsAre(BenchDType::kFp16, BenchDType::kBf16, BenchDType::kBf16Cast));
  EXPECT_THAT(o.modes, ElementsAre(BenchMode::kGraph, BenchMode::kEager));
  EXPECT_TRUE(o.one_shot && o.two_shot && o.nccl && o.peer_bandwidth);
  EXPECT_EQ(o.world_size, 2);
  EXPECT_EQ(o.max_blocks, 0);
  EXPECT_EQ(o.eager_max_bytes, 64 * M);
  EXPECT_EQ(o.peer_bytes, 256 * M);
  EXPECT_TRUE(o.peer_tma_chunks.empty());
  EXPECT_TRUE(o.csv_path.empty() && o.json_path.empty() && o.min_size_table_path.empty());
  EXPECT_FALSE(o.quick);
  EXPECT_FALSE(o.help);
}

TEST(BenchOptionsTest, ListsAreSortedDeduplicatedAndBothFlagSpellingsWork) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--sizes=1M,4K,4K,4096",
                                                       "--regimes",
                                                       "INT4,FP,INT4",
                                                       "--dtypes",
                                                       "bf16cast,fp16",
                                                       "--modes=eager,graph",
                                                       "--algos",
                                                       "one-shot",
                                                       "--world-size=4",
                                                       "--max-blocks",
                                                       "132",
                                                       "--no-nccl",
                                                       "--csv",
                                                       "a.csv",
                                                       "--json=b.json",
                                                       "--min-size-table",
                                                       "t.txt",
                                                       "--eager-max-size",
                                                       "1G",
                                                       "--no-peer-bandwidth",
                                                       "--peer-bytes",
                                                       "32M"}));
  EXPECT_THAT(o.sizes, ElementsAre(4 * K, M));
  EXPECT_THAT(o.regimes, ElementsAre(Codec::kFp, Codec::kInt4));
  EXPECT_THAT(o.dtypes, ElementsAre(BenchDType::kFp16, BenchDType::kBf16Cast));
  EXPECT_THAT(o.modes, ElementsAre(BenchMode::kGraph, BenchMode::kEager));
  EXPECT_TRUE(o.one_shot);
  EXPECT_FALSE(o.two_shot);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.max_blocks, 132);
  EXPECT_FALSE(o.nccl);
  EXPECT_FALSE(o.peer_bandwidth);
  EXPECT_EQ(o.peer_bytes, 32 * M);
  EXPECT_EQ(o.eager_max_bytes, 1024 * M);
  EXPECT_EQ(o.csv_path, "a.csv");
  EXPECT_EQ(o.json_path, "b.json");
  EXPECT_EQ(o.min_size_table_path, "t.txt");
}

TEST(BenchOptionsTest, QuickIsSmallerAndExplicitFlagsOverrideIt) {
  ASSERT_OK_AND_ASSIGN(BenchOptions q, ParseBenchArgs({"--quick"}));
  EXPECT_TRUE(q.quick);
  EXPECT_LT(q.sizes.size(), 11u);
  EXPECT_THAT(q.modes, ElementsAre(BenchMode::kGraph));
  EXPECT_THAT(q.dtypes, ElementsAre(BenchDType::kFp16, BenchDType::kBf16));
  EXPECT_EQ(q.peer_bytes, 64 * M);
  ASSERT_OK_AND_ASSIGN(BenchOptions o,
                       ParseBenchArgs({"--quick", "--modes", "eager", "--sizes", "1M"}));
  EXPECT_THAT(o.modes, ElementsAre(BenchMode::kEager));
  EXPECT_THAT(o.sizes, ElementsAre(M));
  ASSERT_OK_AND_ASSIGN(BenchOptions p, ParseBenchArgs({"--peer-bytes", "16M", "--quick"}));
  EXPECT_EQ(p.peer_bytes, 16 * M);
}

TEST(BenchOptionsTest, AFlagGivenTwiceTakesItsLastValue) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--sizes", "4K", "--world-size", "8",
                                                       "--sizes=1M,2M", "--world-size", "4"}));
  EXPECT_THAT(o.sizes, ElementsAre(M, 2 * M));
  EXPECT_EQ(o.world_size, 4);
}

TEST(BenchOptionsTest, Int3IsDroppedFromTheDefaultAtWorldSizeFourButRejectedWhenAsked) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--world-size", "4"}));
  EXPECT_THAT(o.regimes, ElementsAre(Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4));
  EXPECT_THAT(o.notes, ElementsAre(HasSubstr("INT3")));
  EXPECT_THAT(ParseBenchArgs({"--world-size", "8", "--regimes", "INT3"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("INT3")));
}

TEST(BenchOptionsTest, BadFlagsAreRejectedWithTheFlagNamed) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const Case cases[] = {
      {{"--bogus"}, "--bogus"},
      {{"--sizes"}, "--sizes"},
      {{"--sizes", "3"}, "--sizes: 3 must be a positive multiple of 16"},
      {{"--sizes", "0"}, "multiple of 16"},
      {{"--sizes", "12X"}, "--sizes: '12X' is not a size"},
      {{"--sizes", "8G"}, "at most 4G"},
      {{"--sizes", ","}, "--sizes: '' is not a size"},
      {{"--sizes", "1M,,4M"}, "--sizes: '' is not a size"},
      {{"--regimes", "INT5"}, "--regimes: 'INT5' is not one of FP, INT8"},
      {{"--dtypes", "fp32"}, "--dtypes: 'fp32'"},
      {{"--modes", "lazy"}, "--modes: 'lazy'"},
      {{"--algos", "three-shot"}, "--algos: 'three-shot'"},
      {{"--world-size", "3"}, "--world-size: world size must be 2, 4 or 8, got 3"},
      {{"--world-size", "two"}, "--world-size: 'two' is not an integer"},
      {{"--max-blocks", "-1"}, "--max-blocks: '-1' is not an integer in 0..65536"},
      {{"--max-blocks", "65537"}, "--max-blocks: '65537'"},
      {{"--no-nccl=1"}, "no-nccl"},
      {{"--peer-bytes", "100"}, "--peer-bytes"},
      {{"--eager-max-size", "1T"}, "--eager-max-size"},
      {{"--peer-tma-chunks", "8"}, "--peer-tma-chunks: TMA chunk '8' must be a multiple of 16"},
      {{"--peer-tma-chunks", "4K,4100"}, "TMA chunk '4100'"},
      {{"--peer-tma-chunks", "128K"}, "from 16 to 64K"},
      {{"--peer-tma-chunks", "0"}, "TMA chunk '0'"},
      {{"--peer-tma-chunks", "16k,"}, "TMA chunk ''"},
      {{"--peer-tma-chunks", "4K", "--no-peer-bandwidth"}, "the peer-store bandwidth is off"},
      {{"stray"}, "stray"},
      {{"--modes", "eager", "--sizes", "256M"}, "nothing would be timed"},
      {{"--launch", "threads"}, "--launch: 'threads' is not one of single, per-gpu"},
      {{"--world-size", "1"}, "--world-size 1 needs --launch per-gpu"},
      {{"--launch", "per-gpu", "--peer-tma-chunks", "4K"}, "does not time the peer-store"},
      {{"--worker-rank", "0", "--coord", "/tmp/c"}, "with --launch per-gpu"},
      {{"--launch", "per-gpu", "--worker-rank", "0"}, "--worker-rank and --coord go together"},
      {{"--launch", "per-gpu", "--coord", "/tmp/c"}, "--worker-rank and --coord go together"},
      {{"--launch", "per-gpu", "--worker-rank", "2", "--coord", "/tmp/c"},
       "--worker-rank 2 is not below --world-size 2"},
      {{"--launch-timeout", "5"}, "--launch-timeout: '5' is not an integer in 10..86400"},
      {{"--launch", "per-gpu", "--max-blocks", "64"}, "picks its own grid"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseBenchArgs(c.args), StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.needle)))
        << c.args[0];
  }
}

TEST(BenchOptionsTest, TmaChunksAreKeptInOrderAfterTheSmStores) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--peer-tma-chunks", "32K,4K,4112,64K,16"}));
  EXPECT_THAT(o.peer_tma_chunks, ElementsAre(32 * K, 4 * K, 4112, 64 * K, 16));
  const std::vector<PeerStoreChoice> c = PeerStoreChoices(o.peer_tma_chunks);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_FALSE(c[0].tma);
  EXPECT_EQ(PeerStoreChoiceName(c[0]), "sm");
  EXPECT_TRUE(c[1].tma);
  EXPECT_EQ(c[1].chunk_bytes, 32 * K);
  EXPECT_EQ(PeerStoreChoiceName(c[1]), "tma 32K");
  EXPECT_EQ(PeerStoreChoiceName(c[3]), "tma 4112");
  EXPECT_THAT(PeerStoreChoices({}), ::testing::SizeIs(1));
  ASSERT_OK_AND_ASSIGN(size_t chunk, ParseTmaChunk("16k"));
  EXPECT_EQ(chunk, 16 * K);
}

TEST(BenchOptionsTest, HelpIsAFlagNotAnErrorAndListsEveryFlag) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--help"}));
  EXPECT_TRUE(o.help);
  ASSERT_OK_AND_ASSIGN(BenchOptions h, ParseBenchArgs({"--sizes", "1M", "-h"}));
  EXPECT_TRUE(h.help);
  const std::string usage = BenchUsage();
  for (const char* flag : {"--sizes",
                           "--regimes",
                           "--dtypes",
                           "--modes",
                           "--algos",
                           "--world-size",
                           "--max-blocks",
                           "--eager-max-size",
                           "--no-nccl",
                           "--no-peer-bandwidth",
                           "--peer-bytes",
                           "--peer-tma-chunks",
                           "--csv",
                           "--json",
                           "--min-size-table",
                           "--quick",
                           "--help",
                           "exit: 0",
                           "--launch",
                           "--no-nccl-symm",
                           "--torch-symm",
                           "--torch-script",
                           "--torch-python",
                           "--launch-timeout"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
  // The launcher's own flags for its workers are not for users.
  EXPECT_THAT(usage, ::testing::Not(HasSubstr("--worker-rank")));
  EXPECT_THAT(usage, ::testing::Not(HasSubstr("--coord")));
}

TEST(BenchOptionsTest, SingleProcessIsTheDefaultWithoutTheNewBaselines) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({}));
  EXPECT_EQ(o.launch, BenchLaunch::kSingle);
  EXPECT_FALSE(o.nccl_symm);  // one process: no symmetric baseline
  EXPECT_FALSE(o.torch_symm);
  EXPECT_EQ(o.torch_script, "python/bench/symm_mem_bench.py");
  EXPECT_EQ(o.worker_rank, -1);
}

TEST(BenchOptionsTest, PerGpuAddsNcclSymmetricAndDropsThePeerBandwidth) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--launch", "per-gpu", "--torch-symm"}));
  EXPECT_EQ(o.launch, BenchLaunch::kPerGpu);
  EXPECT_TRUE(o.nccl && o.nccl_symm && o.torch_symm);
  EXPECT_FALSE(o.peer_bandwidth);
  EXPECT_THAT(o.notes, ::testing::Contains(HasSubstr("no peer-store bandwidth")));
  EXPECT_TRUE(o.one_shot && o.two_shot);
  ASSERT_OK_AND_ASSIGN(BenchOptions n, ParseBenchArgs({"--launch=per-gpu", "--no-nccl-symm"}));
  EXPECT_TRUE(n.nccl);
  EXPECT_FALSE(n.nccl_symm);
  ASSERT_OK_AND_ASSIGN(BenchOptions none, ParseBenchArgs({"--launch=per-gpu", "--no-nccl"}));
  EXPECT_FALSE(none.nccl || none.nccl_symm);
  // Said explicitly: no note.
  ASSERT_OK_AND_ASSIGN(BenchOptions q, ParseBenchArgs({"--launch=per-gpu", "--no-peer-bandwidth"}));
  EXPECT_TRUE(q.notes.empty());
}

TEST(BenchOptionsTest, WorldSizeOneRunsTheBaselinesAlone) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--launch", "per-gpu", "--world-size", "1",
                                                       "--launch-timeout", "300"}));
  EXPECT_EQ(o.world_size, 1);
  EXPECT_FALSE(o.one_shot || o.two_shot);
  EXPECT_TRUE(o.nccl && o.nccl_symm);
  EXPECT_EQ(o.launch_timeout_s, 300);
  EXPECT_THAT(o.notes, ::testing::Contains(HasSubstr("only the baselines run")));
}

}  // namespace
}  // namespace qr::bench
