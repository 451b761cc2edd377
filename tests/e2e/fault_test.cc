// Faults across real processes: a member SIGKILLed in the middle of a stream
// of all-reduces (one-shot or two-shot calls) makes every survivor's call
// fail with kPeerFailed within 1 s (measured against the kill on the shared monotonic clock);
// survivors then leave, and all ranks (a fresh process for the dead one) re-join the same group
// name as a new generation that all-reduces correctly. A rank that calls Abort fails its peers the
// same way.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/policy.h"
#include "tests/e2e/cases.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

using std::chrono::milliseconds;

JoinOptions OptionsOf(const WorkerArgs& a) {
  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = a.world_size();
  o.timeout_ms = 30000;
  return o;
}

std::string PathOf(const WorkerArgs& a, const std::string& what, int rank) {
  return a.dir() + "/" + a.group() + "-" + what + "-r" + std::to_string(rank);
}

// One verified all-reduce in a fresh generation.
int RejoinAndCheck(const WorkerArgs& a) {
  auto comm = JoinWithRetry(OptionsOf(a), milliseconds(30000));
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: re-join: %s\n", a.rank(), comm.status().ToString().c_str());
    return 10;
  }
  Case c;
  c.codec = Codec::kInt4;
  c.dtype = DType::kBFloat16;
  c.cast = true;
  c.count = 3 * 16384 + 8;
  c.seed = 4242;
  std::vector<uint16_t> out;
  Status s = RunCase(**comm, c, &out);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: after re-join: %s\n", a.rank(), s.ToString().c_str());
    return 11;
  }
  const demo::Verdict v =
      VerifyCase(c, a.world_size(), AlgorithmOf((*comm)->config(), c, a.world_size()), out.data());
  if (!v.ok()) {
    std::fprintf(stderr, "rank %d: after re-join: %s\n", a.rank(), v.Describe().c_str());
    return 12;
  }
  if ((*comm)->generation() < 2) {
    std::fprintf(stderr, "rank %d: generation %" PRIu64 ", want a new one\n", a.rank(),
                 (*comm)->generation());
    return 13;
  }
  return (*comm)->Leave().ok() ? 0 : 14;
}

// All-reduces of --count values (default 65536) until the group fails;
// records when and how, leaves, re-joins. --algorithm names the algorithm the
// calls must run (so that a retuned ceiling cannot silently change what a
// test covers).
int StreamWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: join: %s\n", a.rank(), comm.status().ToString().c_str());
    return 2;
  }
  std::vector<uint16_t> in(static_cast<size_t>(a.GetInt("count", 65536))), out(in.size());
  const Algorithm algorithm =
      ChooseAlgorithm((*comm)->config(), in.size() * 2, (*comm)->world_size(), WorkFormat::kFp16,
                      Codec::kInt8);  // the calls below
  if (a.Get("algorithm", AlgorithmName(algorithm)) != AlgorithmName(algorithm)) {
    std::fprintf(stderr, "rank %d: %zu values run %s, not %s\n", a.rank(), in.size(),
                 AlgorithmName(algorithm), a.Get("algorithm").c_str());
    return 15;
  }
  demo::FillInput(DType::kFloat16, a.rank(), 7, static_cast<int64_t>(in.size()), in.data());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Status s;
  for (int i = 0; std::chrono::steady_clock::now() < give_up; ++i) {
    s = (*comm)->AllReduce(in.data(), out.data(), in.size(), DType::kFloat16, Regime::kInt8, false);
    if (!s.ok()) break;
    if (i == 20 && !WriteFile(PathOf(a, "progress", a.rank()), "20\n")) return 3;
  }
  const int64_t failed_at = MonotonicNanos();
  if (!WriteFile(PathOf(a, "fail", a.rank()), std::to_string(static_cast<int>(s.code())) + " " +
                                                  std::to_string(failed_at) + " " + s.message() +
                                                  "\n")) {
    return 3;
  }
  if (s.code() != StatusCode::kPeerFailed) {
    std::fprintf(stderr, "rank %d: stream ended with %s\n", a.rank(), s.ToString().c_str());
    return 4;
  }
  // Sticky; eligibility is a pure function of the message (unchanged on a
  // failed group), the call itself fails.
  if ((*comm)->Check().code() != StatusCode::kPeerFailed) return 5;
  if (!(*comm)->ShouldAllReduce(16 << 20, DType::kFloat16)) return 6;
  if ((*comm)
          ->AllReduce(in.data(), out.data(), in.size(), DType::kFloat16, Regime::kFp, false)
          .code() != StatusCode::kPeerFailed) {
    return 7;
  }
  (*comm)->Leave().IgnoreError();  // the group is failed; leaving still frees
  comm->reset();
  return RejoinAndCheck(a);
}

int RejoinWorker(const WorkerArgs& a) { return RejoinAndCheck(a); }

// Streams like the others, then gives up on purpose with Abort once every rank
// is streaming; its peers must fail at once, not after QR_OP_TIMEOUT_MS.
int AbortWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) return 2;
  std::vector<uint16_t> in(65536), out(in.size());
  demo::FillInput(DType::kFloat16, a.rank(), 7, static_cast<int64_t>(in.size()), in.data());
  for (int i = 0; i <= 20; ++i) {
    if (!(*comm)
             ->AllReduce(in.data(), out.data(), in.size(), DType::kFloat16, Regime::kInt8, false)
             .ok()) {
      return 3;
    }
  }
  if (!WriteFile(PathOf(a, "progress", a.rank()), "20\n")) return 3;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < a.world_size(); ++r) {
    while (::access(PathOf(a, "progress", r).c_str(), F_OK) != 0) {
      if (std::chrono::steady_clock::now() > deadline) return 4;
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
  if (!WriteFile(PathOf(a, "abort-at", a.rank()), std::to_string(MonotonicNanos()) + "\n")) {
    return 5;
  }
  if (!(*comm)->Abort("rank-local fatal error").ok()) return 6;
  if ((*comm)->Check().code() != StatusCode::kPeerFailed) return 7;
  if ((*comm)
          ->AllReduce(in.data(), out.data(), in.size(), DType::kFloat16, Regime::kFp, false)
          .code() != StatusCode::kPeerFailed) {
    return 8;
  }
  if (!(*comm)->Leave().ok()) return 9;
  if ((*comm)->Abort("again").code() != StatusCode::kInvalidArgument) return 10;
  comm->reset();
  return RejoinAndCheck(a);
}

class FaultTest : public E2eTest {
 protected:
  // One-shot: 16 KiB calls under the built-in ceiling; two-shot: 128 KiB
  // calls with one-shot off.
  void KillOneMidStream(int world_size, int victim, Algorithm algorithm) {
    const bool one_shot = algorithm == Algorithm::kOneShot;
    const std::string group =
        UniqueGroup("kill" + std::to_string(world_size) + (one_shot ? "-one" : "-two"));
    const std::map<std::string, std::string> args = {{"count", one_shot ? "8192" : "65536"},
                                                     {"algorithm", AlgorithmName(algorithm)}};
    const std::vector<std::string> env =
        one_shot ? std::vector<std::string>{} : std::vector<std::string>{"QR_ONE_SHOT_MAX_KB=0"};
    std::vector<pid_t> pids = SpawnWorkers("stream", group, world_size, args, env);
    // Wait until every rank is streaming.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < world_size; ++r) {
      const std::string p = dir_ + "/" + group + "-progress-r" + std::to_string(r);
      while (::access(p.c_str(), F_OK) != 0) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank " << r << " never streamed";
        std::this_thread::sleep_for(milliseconds(5));
      }
    }
    const int64_t killed_at = MonotonicNanos();
    ASSERT_EQ(::kill(pids[victim], SIGKILL), 0);
    ASSERT_EQ(*WaitExit(pids[victim], std::chrono::seconds(10)), 128 + SIGKILL);
    pids[victim] = SpawnWorker("rejoin", group, victim, world_size, {}, env);

    std::vector<int> codes = WaitAll(pids, std::chrono::seconds(120));
    for (int r = 0; r < world_size; ++r) {
      EXPECT_EQ(codes[r], 0) << "rank " << r << (r == victim ? " (replacement)" : "");
      if (r == victim) continue;
      int code = -1;
      long long at = 0;
      const std::string text = ReadFile(dir_ + "/" + group + "-fail-r" + std::to_string(r));
      ASSERT_EQ(std::sscanf(text.c_str(), "%d %lld", &code, &at), 2) << "rank " << r;
      EXPECT_EQ(code, static_cast<int>(StatusCode::kPeerFailed)) << "rank " << r;
      const double seconds = static_cast<double>(at - killed_at) / 1e9;
      std::printf("rank %d saw PEER_FAILED %.3f s after the kill\n", r, seconds);
      EXPECT_LT(seconds, 1.0) << "rank " << r;
    }
  }
};

TEST_F(FaultTest, AbortingRankFailsPeersWithinOneSecondThenRejoin) {
  const int world_size = 4, aborter = 2;
  const std::string group = UniqueGroup("abort");
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) {
    pids.push_back(SpawnWorker(r == aborter ? "abort" : "stream", group, r, world_size));
  }
  std::vector<int> codes = WaitAll(pids, std::chrono::seconds(120));
  long long aborted_at = 0;
  ASSERT_EQ(std::sscanf(ReadFile(dir_ + "/" + group + "-abort-at-r2").c_str(), "%lld", &aborted_at),
            1);
  for (int r = 0; r < world_size; ++r) {
    EXPECT_EQ(codes[r], 0) << "rank " << r;
    if (r == aborter) continue;
    int code = -1;
    long long at = 0;
    const std::string text = ReadFile(dir_ + "/" + group + "-fail-r" + std::to_string(r));
    ASSERT_EQ(std::sscanf(text.c_str(), "%d %lld", &code, &at), 2) << "rank " << r;
    EXPECT_EQ(code, static_cast<int>(StatusCode::kPeerFailed)) << "rank " << r;
    const double seconds = static_cast<double>(at - aborted_at) / 1e9;
    std::printf("rank %d saw PEER_FAILED %.3f s after the abort\n", r, seconds);
    EXPECT_NE(text.find("rank-local fatal error"), std::string::npos)
        << "rank " << r << " was not told why: " << text;
    EXPECT_LT(seconds, 1.0) << "rank " << r;
  }
}

TEST_F(FaultTest, KilledRankFailsSurvivorsWithinOneSecondThenRejoinWs2) {
  KillOneMidStream(2, 1, Algorithm::kTwoShot);
}

TEST_F(FaultTest, KilledRankFailsSurvivorsWithinOneSecondThenRejoinWs4) {
  KillOneMidStream(4, 0, Algorithm::kTwoShot);
}

TEST_F(FaultTest, KilledRankFailsSurvivorsWithinOneSecondThenRejoinWs8) {
  KillOneMidStream(8, 5, Algorithm::kTwoShot);
}

TEST_F(FaultTest, KilledRankDuringOneShotCallsFailsSurvivorsThenRejoinWs2) {
  KillOneMidStream(2, 0, Algorithm::kOneShot);
}

TEST_F(FaultTest, KilledRankDuringOneShotCallsFailsSurvivorsThenRejoinWs8) {
  KillOneMidStream(8, 3, Algorithm::kOneShot);
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv,
                              {{"stream", &qr::testing::StreamWorker},
                               {"rejoin", &qr::testing::RejoinWorker},
                               {"abort", &qr::testing::AbortWorker}});
}
