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
  EXPECT_THAT(o.sizes, ElementsAre(4 * K, 16 * K, 64 * K, 256 * K, M, 2 * M, 4 * M, 16 * M,
                                   64 * M, 256 * M, 1024 * M));
  EXPECT_THAT(o.regimes,
              ElementsAre(Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3));
  EXPECT_THAT(o.dtypes, ElementsAre(BenchDType::kFp16, BenchDType::kBf16, BenchDType::kBf16Cast));
  EXPECT_THAT(o.modes, ElementsAre(BenchMode::kGraph, BenchMode::kEager));
  EXPECT_TRUE(o.one_shot && o.two_shot && o.nccl && o.peer_bandwidth);
  EXPECT_EQ(o.world_size, 2);
  EXPECT_EQ(o.max_blocks, 0);
  EXPECT_EQ(o.eager_max_bytes, 64 * M);
  EXPECT_FALSE(o.help);
}

TEST(BenchOptionsTest, ListsAreSortedDeduplicatedAndBothFlagSpellingsWork) {
  ASSERT_OK_AND_ASSIGN(
      BenchOptions o,
      ParseBenchArgs({"--sizes=1M,4K,4K,4096", "--regimes", "INT4,FP,INT4", "--dtypes",
                      "bf16cast,fp16", "--modes=eager,graph", "--algos", "one-shot",
                      "--world-size=4", "--max-blocks", "132", "--no-nccl", "--csv", "a.csv",
                      "--json=b.json", "--min-size-table", "t.txt", "--eager-max-size", "1G",
                      "--no-peer-bandwidth", "--peer-bytes", "32M"}));
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
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--quick", "--modes", "eager", "--sizes", "1M"}));
  EXPECT_THAT(o.modes, ElementsAre(BenchMode::kEager));
  EXPECT_THAT(o.sizes, ElementsAre(M));
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
      {{"--bogus"}, "unknown flag '--bogus'"},
      {{"--sizes"}, "--sizes needs a value"},
      {{"--sizes", "3"}, "multiple of 16"},
      {{"--sizes", "0"}, "multiple of 16"},
      {{"--sizes", "12X"}, "not a size"},
      {{"--sizes", "8G"}, "at most 4G"},
      {{"--sizes", ","}, "--sizes: empty"},
      {{"--regimes", "INT5"}, "--regimes: 'INT5'"},
      {{"--dtypes", "fp32"}, "--dtypes: 'fp32'"},
      {{"--modes", "lazy"}, "--modes: 'lazy'"},
      {{"--algos", "three-shot"}, "--algos: 'three-shot'"},
      {{"--world-size", "3"}, "--world-size: 3"},
      {{"--world-size", "two"}, "--world-size: 'two'"},
      {{"--max-blocks", "-1"}, "--max-blocks"},
      {{"--no-nccl=1"}, "--no-nccl takes no value"},
      {{"--peer-bytes", "100"}, "--peer-bytes"},
      {{"--modes", "eager", "--sizes", "256M"}, "nothing would be timed"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseBenchArgs(c.args), StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.needle)))
        << c.args[0];
  }
}

TEST(BenchOptionsTest, HelpIsAFlagNotAnError) {
  ASSERT_OK_AND_ASSIGN(BenchOptions o, ParseBenchArgs({"--help"}));
  EXPECT_TRUE(o.help);
  EXPECT_THAT(BenchUsage(), HasSubstr("--min-size-table"));
}

TEST(BenchOptionsTest, SizesParseAndPrintInWholeUnits) {
  const std::pair<const char*, size_t> cases[] = {
      {"4096", 4096}, {"4K", 4096}, {"16k", 16 * K}, {"1M", M}, {"3m", 3 * M}, {"1G", 1024 * M}};
  for (const auto& [text, bytes] : cases) {
    ASSERT_OK_AND_ASSIGN(size_t b, ParseSize(text));
    EXPECT_EQ(b, bytes) << text;
  }
  EXPECT_EQ(SizeName(4096), "4K");
  EXPECT_EQ(SizeName(1536 * K), "1536K");
  EXPECT_EQ(SizeName(2 * M), "2M");
  EXPECT_EQ(SizeName(1024 * M), "1G");
  EXPECT_EQ(SizeName(100), "100");
  for (size_t b : {size_t{16}, 4 * K, 1536 * K, 64 * M, 1024 * M}) {
    ASSERT_OK_AND_ASSIGN(size_t back, ParseSize(SizeName(b)));
    EXPECT_EQ(back, b);
  }
  for (const char* bad : {"", "K", "-1", "1.5M", "1MB", "99999999999999999999"}) {
    EXPECT_THAT(ParseSize(bad), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
}

}  // namespace
}  // namespace qr::bench
