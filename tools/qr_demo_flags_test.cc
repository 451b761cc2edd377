#include "tools/qr_demo_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr::demo {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DemoFlagsTest, DefaultsAreTwoWorkersEveryRegimeBothDtypes) {
  ASSERT_OK_AND_ASSIGN(DemoFlags f, ParseDemoArgs({}));
  EXPECT_EQ(f.world_size, 2);
  EXPECT_EQ(f.device, "auto");
  EXPECT_THAT(f.sizes, ElementsAre(16u, 48u * 1024 + 16, 1u << 20, 8u << 20));
  EXPECT_TRUE(f.regimes.empty());
  EXPECT_THAT(f.dtypes, ElementsAre(DType::kFloat16, DType::kBFloat16));
  EXPECT_TRUE(f.group.empty());
  EXPECT_EQ(f.worker_rank, -1);
  EXPECT_FALSE(f.help);
}

TEST(DemoFlagsTest, EveryFlagInBothSpellings) {
  ASSERT_OK_AND_ASSIGN(DemoFlags f, ParseDemoArgs({"--world-size=4", "--device", "host", "--sizes",
                                                   "4096,8388608,1M", "--regimes=INT4,FP",
                                                   "--dtypes", "bf16", "--group", "g1"}));
  EXPECT_EQ(f.world_size, 4);
  EXPECT_EQ(f.device, "host");
  EXPECT_THAT(f.sizes, ElementsAre(4096u, 8388608u, 1u << 20));
  EXPECT_THAT(f.regimes, ElementsAre(Codec::kInt4, Codec::kFp));
  EXPECT_THAT(f.dtypes, ElementsAre(DType::kBFloat16));
  EXPECT_EQ(f.group, "g1");
}

TEST(DemoFlagsTest, WorkerArgsParseBackToTheLaunchersFlags) {
  ASSERT_OK_AND_ASSIGN(DemoFlags f, ParseDemoArgs({"--world-size", "8", "--sizes", "32,64K",
                                                   "--regimes", "INT8", "--dtypes", "fp16"}));
  ASSERT_OK_AND_ASSIGN(DemoFlags w, ParseDemoArgs(WorkerArgs(f, "gpu", "grp", 5)));
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.device, "gpu");
  EXPECT_EQ(w.group, "grp");
  EXPECT_EQ(w.worker_rank, 5);
  EXPECT_EQ(w.sizes, f.sizes);
  EXPECT_EQ(w.regimes, f.regimes);
  EXPECT_EQ(w.dtypes, f.dtypes);
  // No --regimes: the worker picks every codec the world size allows too.
  ASSERT_OK_AND_ASSIGN(DemoFlags all, ParseDemoArgs(WorkerArgs(DemoFlags{}, "host", "g", 0)));
  EXPECT_TRUE(all.regimes.empty());
  EXPECT_EQ(all.sizes, DemoFlags{}.sizes);
}

TEST(DemoFlagsTest, BadFlagsAreRejectedWithTheFlagNamed) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const Case cases[] = {
      {{"--bogus"}, "--bogus"},
      {{"--world-size", "3"}, "--world-size: world size must be 2, 4 or 8, got 3"},
      {{"--world-size", "x"}, "--world-size: 'x' is not an integer"},
      {{"--world-size"}, "--world-size"},
      {{"--device", "tpu"}, "--device: 'tpu' is not one of auto, host, gpu"},
      {{"--sizes", "100"}, "--sizes: size '100' is not a positive multiple of 16 bytes"},
      {{"--sizes", "0"}, "size '0' is not a positive multiple of 16"},
      {{"--sizes", "16,"}, "size '' is not a positive multiple of 16"},
      {{"--regimes", "INT5"}, "--regimes: regime 'INT5' is not one of"},
      {{"--regimes", "FP,"}, "regime '' is not one of"},
      {{"--dtypes", "fp16,fp32"}, "--dtypes: dtype 'fp32' is not fp16 or bf16"},
      {{"--worker-rank", "8"}, "'8' is not an integer in 0..7"},  // hidden: CLI11 names no flag
      {{"stray"}, "stray"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseDemoArgs(c.args), StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.needle)))
        << c.args[0];
  }
}

TEST(DemoFlagsTest, HelpListsTheUserFlagsButNotTheInternalOne) {
  ASSERT_OK_AND_ASSIGN(DemoFlags f, ParseDemoArgs({"--help"}));
  EXPECT_TRUE(f.help);
  const std::string usage = DemoUsage();
  for (const char* flag : {"--world-size", "--device", "--sizes", "--regimes", "--dtypes",
                           "--group", "--help", "QR_BROKER_SOCKET", "exit: 0"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
  EXPECT_THAT(usage, ::testing::Not(HasSubstr("--worker-rank")));
}

}  // namespace
}  // namespace qr::demo
