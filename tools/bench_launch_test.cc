#include "tools/bench_launch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/status_matchers.h"
#include "tools/bench_coord.h"
#include "tools/bench_options.h"

namespace qr::bench {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FakeWorker() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/quickreduce/tools/bench_fake_worker";
}

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/qr-launch-test.XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    dir_ = t;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }

  // Runs one fake worker per mode; their exit codes.
  WorkerGroupResult Run(const std::vector<std::string>& modes,
                        std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const std::string sock = dir_ + "/coord.sock";
    auto server = CoordServer::Listen(sock, static_cast<int>(modes.size()));
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    std::vector<std::vector<std::string>> argvs;
    for (size_t r = 0; r < modes.size(); ++r) {
      argvs.push_back(
          {FakeWorker(), sock, std::to_string(r), modes[r], dir_ + "/out" + std::to_string(r)});
    }
    auto g = RunWorkerGroup(argvs, *server, timeout, std::chrono::seconds(5));
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? *g : WorkerGroupResult{};
  }

  std::string Out(int r) {
    std::ifstream f(dir_ + "/out" + std::to_string(r));
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  std::string dir_;
};

TEST_F(LaunchTest, EveryWorkerGetsRankZerosIdAndTheGather) {
  const WorkerGroupResult g = Run({"ok", "ok", "ok", "ok"});
  EXPECT_THAT(g.exit_codes, ElementsAre(0, 0, 0, 0));
  EXPECT_FALSE(g.timed_out);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(Out(r), "id-0102 4\n") << "rank " << r;
  EXPECT_EQ(CombineWorkerExits(g.exit_codes), 0);
}

TEST_F(LaunchTest, OneWorkerIsAGroupToo) {
  const WorkerGroupResult g = Run({"ok"});
  EXPECT_THAT(g.exit_codes, ElementsAre(0));
  EXPECT_EQ(Out(0), "id-0102 1\n");
}

TEST_F(LaunchTest, AWorkerThatDiesFailsTheOthersInsteadOfHangingThem) {
  const auto start = std::chrono::steady_clock::now();
  const WorkerGroupResult g = Run({"ok", "die", "ok"});
  // The others fail instead of waiting for rank 1: at their first exchange
  // (4), or, connecting after the coordinator gave up, at their hello (5).
  EXPECT_THAT(g.exit_codes, ElementsAre(AnyOf(4, 5), 7, AnyOf(4, 5)));
  EXPECT_FALSE(g.timed_out);
  EXPECT_THAT(g.abort_reason, HasSubstr("rank 1"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(CombineWorkerExits(g.exit_codes), 1);
}

TEST_F(LaunchTest, AHungWorkerIsStoppedAtTheTimeout) {
  const WorkerGroupResult g = Run({"ok", "hang"}, std::chrono::milliseconds(1500));
  EXPECT_TRUE(g.timed_out);
  EXPECT_EQ(g.exit_codes[1], 128 + SIGKILL);
  EXPECT_EQ(CombineWorkerExits(g.exit_codes), 1);
}

TEST_F(LaunchTest, SomeCellsFailedIsExitThree) {
  const WorkerGroupResult g = Run({"three", "ok"});
  EXPECT_THAT(g.exit_codes, ElementsAre(3, 0));
  EXPECT_EQ(CombineWorkerExits(g.exit_codes), 3);
}

TEST_F(LaunchTest, AWorkerThatCannotStartIsAnError) {
  auto server = CoordServer::Listen(dir_ + "/c.sock", 1);
  ASSERT_TRUE(server.ok());
  // Spawn's child exits 127 when exec fails: reported as the worker's code.
  auto g = RunWorkerGroup({{dir_ + "/no-such-binary"}}, *server, std::chrono::seconds(5));
  ASSERT_TRUE(g.ok());
  EXPECT_THAT(g->exit_codes, ElementsAre(127));
}

TEST(CombineWorkerExitsTest, WorstWins) {
  EXPECT_EQ(CombineWorkerExits({}), 1);
  EXPECT_EQ(CombineWorkerExits({0, 0}), 0);
  EXPECT_EQ(CombineWorkerExits({0, 3}), 3);
  EXPECT_EQ(CombineWorkerExits({2, 0}), 2);
  EXPECT_EQ(CombineWorkerExits({3, 1}), 1);
  EXPECT_EQ(CombineWorkerExits({0, 128 + 9}), 1);
}

TEST(WorkerArgsTest, TheLaunchersFlagsThenTheWorkerFlags) {
  const std::vector<std::string> launcher = {"--launch", "per-gpu", "--world-size",
                                             "2",        "--csv",   "b.csv"};
  EXPECT_THAT(WorkerArgs(launcher, 1, "/tmp/d/coord.sock", ""),
              ElementsAre("--launch", "per-gpu", "--world-size", "2", "--csv", "b.csv",
                          "--worker-rank", "1", "--coord", "/tmp/d/coord.sock"));
  // Parsing a worker's line gives the launcher's options plus its rank.
  ASSERT_OK_AND_ASSIGN(BenchOptions o,
                       ParseBenchArgs(WorkerArgs(launcher, 1, "/tmp/c", "/tmp/t.csv")));
  EXPECT_EQ(o.worker_rank, 1);
  EXPECT_EQ(o.coord_path, "/tmp/c");
  EXPECT_EQ(o.torch_rows_path, "/tmp/t.csv");
  EXPECT_EQ(o.csv_path, "b.csv");
  EXPECT_EQ(o.launch, BenchLaunch::kPerGpu);
}

}  // namespace
}  // namespace qr::bench
