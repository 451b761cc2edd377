// All-reduce across real processes on the host backend: world sizes 2, 4, 8,
// every codec and dtype, sizes from 16 bytes to 64 MiB with partial tiles and
// partial segments, in place and not, two-shot (QR_ONE_SHOT_MAX_KB=0) and
// one-shot interleaved with two-shot (the built-in ceilings). Every output
// must equal the reference of the algorithm the policy picked bit for bit
// (one rank per case recomputes it), stay within the proven bound of the
// exact sum, and be identical on every rank (ranks write fingerprints that
// the driver compares).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/policy.h"
#include "tests/e2e/cases.h"
#include "tests/e2e/harness.h"
#include "tests/util/status_matchers.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

JoinOptions OptionsOf(const WorkerArgs& a) {
  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = a.world_size();
  o.timeout_ms = 60000;
  return o;
}

int SweepWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: join: %s\n", a.rank(), comm.status().ToString().c_str());
    return 2;
  }
  std::string fingerprints;
  // Each case is checked by one rank (its index modulo the world size), and
  // only after the group is done: checking a large case between calls kept
  // its peers waiting in their next call, and under load that wait ran into
  // the op timeout (QR_OP_TIMEOUT_MS). The driver compares every rank's
  // fingerprints, so the checked output is every rank's. Spread over the
  // ranks, the checks run in parallel (one rank checking the 64 MiB cases
  // alone was most of the test's time) and no rank holds every output.
  struct Result {
    Case c;
    Algorithm algorithm;
    std::vector<uint16_t> out;
  };
  std::vector<Result> results;
  std::vector<uint16_t> out;
  int index = 0;
  for (const Case& c : ParseCases(a.Get("cases"))) {
    Status s = RunCase(**comm, c, &out);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: %s: %s\n", a.rank(), CaseName(c).c_str(),
                   s.ToString().c_str());
      return 3;
    }
    char line[128];
    std::snprintf(line, sizeof(line), "%s %016" PRIx64 "\n", CaseName(c).c_str(),
                  Fingerprint(out.data(), out.size() * 2));
    fingerprints += line;
    if (index++ % a.world_size() == a.rank()) {
      results.push_back({c, AlgorithmOf((*comm)->config(), c, a.world_size()), out});
    }
  }
  if (!WriteFile(FingerprintPath(a), fingerprints)) return 4;
  Status s = (*comm)->Leave();
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: leave: %s\n", a.rank(), s.ToString().c_str());
    return 5;
  }
  int failures = 0;
  for (const Result& r : results) {
    const demo::Verdict v = VerifyCase(r.c, a.world_size(), r.algorithm, r.out.data());
    if (!v.ok()) {
      std::fprintf(stderr, "rank %d: %s (%s): %s\n", a.rank(), CaseName(r.c).c_str(),
                   AlgorithmName(r.algorithm), v.Describe().c_str());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

// Ranks disagree on the size: the host backend must notice and fail the
// group rather than mix data or wait for QR_OP_TIMEOUT_MS, on every rank.
int MismatchWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) return 2;
  const size_t n = 4096 * (a.rank() + 1);
  std::vector<uint16_t> in(n, 0), out(in.size());
  const auto t0 = std::chrono::steady_clock::now();
  Status s =
      (*comm)->AllReduce(in.data(), out.data(), in.size(), DType::kFloat16, Regime::kFp, false);
  if (s.code() != StatusCode::kPeerFailed || s.message().find("mismatch") == std::string::npos) {
    std::fprintf(stderr, "rank %d: want PEER_FAILED (mismatch), got %s\n", a.rank(),
                 s.ToString().c_str());
    return 1;
  }
  if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
    std::fprintf(stderr, "rank %d: the mismatch took until a timeout\n", a.rank());
    return 7;
  }
  if ((*comm)->Check().code() != StatusCode::kPeerFailed) return 6;
  return (*comm)->Leave().ok() ? 0 : 5;
}

// Ranks whose QR_ONE_SHOT_MAX_KB differ would run different algorithms for
// the same call: every rank's join must refuse, naming the variable, at
// once (not at the join or op timeout).
int CeilingMismatchWorker(const WorkerArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  auto comm = Communicator::Join(OptionsOf(a));
  if (comm.ok()) {
    std::fprintf(stderr, "rank %d: join succeeded\n", a.rank());
    return 1;
  }
  const Status& s = comm.status();
  if (s.code() != StatusCode::kInvalidArgument ||
      s.message().find("QR_ONE_SHOT_MAX_KB") == std::string::npos) {
    std::fprintf(stderr, "rank %d: want INVALID_ARGUMENT naming QR_ONE_SHOT_MAX_KB, got %s\n",
                 a.rank(), s.ToString().c_str());
    return 3;
  }
  // The join's context is added once: "joining group g rank r: rank ...".
  const std::string context = "joining group " + a.group() + " rank " + std::to_string(a.rank());
  if (s.message().rfind(context + ": rank ", 0) != 0 ||
      s.message().find(": :") != std::string::npos) {
    std::fprintf(stderr, "rank %d: want one '%s: ' before the reason, got %s\n", a.rank(),
                 context.c_str(), s.ToString().c_str());
    return 4;
  }
  if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
    std::fprintf(stderr, "rank %d: the refusal took until a timeout\n", a.rank());
    return 7;
  }
  return 0;
}

class AllReduceTest : public E2eTest {
 protected:
  struct Running {
    std::string group;
    int world_size;
    size_t num_cases;
    std::vector<pid_t> pids;
  };

  // Two-shot only unless `env` says otherwise: these sweeps are about the
  // two-shot's tiles and segments at every size.
  Running StartSweep(const std::string& tag, int world_size, const std::vector<Case>& cases,
                     const std::vector<std::string>& env = {"QR_ONE_SHOT_MAX_KB=0"}) {
    Running r{UniqueGroup(tag + std::to_string(world_size)), world_size, cases.size(), {}};
    r.pids = SpawnWorkers("sweep", r.group, world_size, {{"cases", FormatCases(cases)}}, env);
    return r;
  }

  void Finish(const Running& run) {
    std::vector<int> codes = WaitAll(run.pids, std::chrono::seconds(280));
    for (int r = 0; r < run.world_size; ++r) {
      ASSERT_EQ(codes[r], 0) << run.group << " rank " << r << " of " << run.world_size;
    }
    const std::string first = ExpectSameOutputsOnEveryRank(run.group, run.world_size);
    EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), static_cast<long>(run.num_cases));
  }

  void RunSweep(int world_size, const std::vector<Case>& cases) {
    Finish(StartSweep("sweep", world_size, cases));
  }

  // One-shot under the built-in ceiling, every dtype, in place and not,
  // interleaved with two-shot calls of other sizes.
  void RunOneShotSweep(int world_size) {
    const std::vector<Case> cases = OneShotSweep(world_size);
    Config defaults;
    int one_shot = 0;
    for (const Case& c : cases)
      one_shot += AlgorithmOf(defaults, c, world_size) == Algorithm::kOneShot;
    ASSERT_GE(one_shot, 12) << "the sweep should mostly run one-shot";
    ASSERT_LT(one_shot, static_cast<int>(cases.size())) << "and some two-shot in between";
    Finish(StartSweep("one-shot", world_size, cases, /*env=*/{}));
  }

  // Per dtype variant (fp16, bf16 cast, bf16): one-shot calls of 16 B, a
  // partial block, a tile + 16 B and the largest one-shot size, two in a row
  // where the phases alternate and one right after a two-shot call; two-shot
  // calls just above the ceiling and larger. Codecs rotate: one-shot ignores
  // them, the two-shot calls honour them, and the ceiling is the case's own
  // (fp16 INT4/INT3 have a lower one).
  static std::vector<Case> OneShotSweep(int world_size) {
    std::vector<Codec> codecs;
    for (Codec k : kAllCodecs) {
      if (k != Codec::kInt3 || world_size == 2) codecs.push_back(k);
    }
    std::vector<Case> cases;
    for (int d = 0; d < 3; ++d) {
      for (int kind = 0; kind < 6; ++kind) {
        Case c;
        c.codec = codecs[cases.size() % codecs.size()];
        c.dtype = d == 0 ? DType::kFloat16 : DType::kBFloat16;
        c.cast = d == 1;
        const int64_t max =
            DefaultOneShotMaxBytes(world_size, WorkFormatOf(c.dtype, c.cast), c.codec) / 2;
        const int64_t counts[] = {8, 1000, max + 8, 16392, max, max + 16392};
        c.count = counts[kind];
        c.in_place = cases.size() % 2 == 1;
        cases.push_back(c);
      }
    }
    return cases;
  }
};

// 8 = 16 B; 1000 = one partial atom row; 16392 = a tile + 16 B; 49160 = 3
// tiles + a partial one; counts above 64 tiles take several rounds.
TEST_F(AllReduceTest, WorldSize2EveryCodecAndDtype) {
  RunSweep(2, Sweep(2, {8, 1000, 16392, 49160, 1 << 20 | 8}));
}

TEST_F(AllReduceTest, WorldSize4EveryCodecAndDtype) {
  RunSweep(4, Sweep(4, {8, 16392, 200008, 1 << 20}));
}

TEST_F(AllReduceTest, WorldSize8EveryCodecAndDtype) { RunSweep(8, Sweep(8, {8, 16392, 131080})); }

// The largest message, in both wire families: FP (fp16, out of place) and
// INT8 (bf16 cast to fp16, in place). INT6/INT4/INT3 take several rounds in
// the sweeps above (1 << 20 | 8 at world size 2); at 64 MiB each added ~15 s
// of CI's two cores, twice (the main step and the fresh-Debian one).
TEST_F(AllReduceTest, WorldSize2SixtyFourMiB) {
  const int64_t n = 32 << 20;  // 64 MiB of 16-bit values
  std::vector<Case> cases;
  int i = 0;
  for (Codec codec : {Codec::kFp, Codec::kInt8}) {
    Case c;
    c.codec = codec;
    c.dtype = i % 2 == 0 ? DType::kFloat16 : DType::kBFloat16;
    c.cast = i == 1;
    c.in_place = i % 2 == 1;
    c.count = n;
    cases.push_back(c);
    ++i;
  }
  RunSweep(2, cases);
}

// Two groups of different names and sizes, formed and running at once
// through one broker, do not disturb each other.
TEST_F(AllReduceTest, TwoGroupsAtOnce) {
  Running a = StartSweep("group-a", 2, Sweep(2, {16392, 200008}));
  Running b = StartSweep("group-b", 4, Sweep(4, {8, 49160}));
  Finish(a);
  Finish(b);
}

TEST_F(AllReduceTest, OneShotInterleavedWithTwoShotWs2) { RunOneShotSweep(2); }
TEST_F(AllReduceTest, OneShotInterleavedWithTwoShotWs4) { RunOneShotSweep(4); }
TEST_F(AllReduceTest, OneShotInterleavedWithTwoShotWs8) { RunOneShotSweep(8); }

TEST_F(AllReduceTest, MismatchedSizesFailEveryRank) { RunWorkers("mismatch", 2); }

// Rank 0 would run 8 KiB two-shot, the others one-shot.
TEST_F(AllReduceTest, RanksDisagreeingOnTheOneShotCeilingAreRefusedAtJoin) {
  const std::string group = UniqueGroup("ceiling-mismatch");
  std::vector<pid_t> pids;
  for (int r = 0; r < 4; ++r) {
    pids.push_back(SpawnWorker(
        "ceiling-mismatch", group, r, 4, {},
        r == 0 ? std::vector<std::string>{"QR_ONE_SHOT_MAX_KB=0"} : std::vector<std::string>{}));
  }
  std::vector<int> codes = WaitAll(pids, std::chrono::seconds(60));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv,
                              {{"sweep", &qr::testing::SweepWorker},
                               {"mismatch", &qr::testing::MismatchWorker},
                               {"ceiling-mismatch", &qr::testing::CeilingMismatchWorker}});
}
