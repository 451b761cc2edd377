// All-reduce across real processes on the host backend: world sizes 2, 4, 8,
// every codec and dtype, sizes from 16 bytes to 64 MiB with partial tiles and
// partial segments, in place and not. Every output must equal
// ReferenceAllReduce bit for bit (rank 0 recomputes it), stay within the
// codec's proven bound of the exact sum, and be identical on every rank
// (ranks write fingerprints that the driver compares).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"
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

std::string FingerprintPath(const WorkerArgs& a, int rank) {
  return a.dir() + "/" + a.group() + "-r" + std::to_string(rank) + ".fp";
}

int SweepWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: join: %s\n", a.rank(), comm.status().ToString().c_str());
    return 2;
  }
  int failures = 0;
  std::string fingerprints;
  std::vector<uint16_t> out;
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
    if (a.rank() == 0) {
      const demo::Verdict v = demo::Verify(ParamsOf(c, a.world_size()), c.seed, out.data());
      if (!v.ok()) {
        std::fprintf(stderr, "rank 0: %s: %s\n", CaseName(c).c_str(), v.Describe().c_str());
        ++failures;
      }
    }
  }
  if (!WriteFile(FingerprintPath(a, a.rank()), fingerprints)) return 4;
  Status s = (*comm)->Leave();
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: leave: %s\n", a.rank(), s.ToString().c_str());
    return 5;
  }
  return failures == 0 ? 0 : 1;
}

// Ranks disagree on the size: the host backend must notice and fail the
// group rather than mix data, on every rank.
int MismatchWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) return 2;
  std::vector<uint16_t> in(4096 * (a.rank() + 1), 0), out(in.size());
  Status s =
      (*comm)->AllReduce(in.data(), out.data(), in.size(), DType::kFloat16, Regime::kFp, false);
  if (s.code() != StatusCode::kPeerFailed) {
    std::fprintf(stderr, "rank %d: want PEER_FAILED, got %s\n", a.rank(), s.ToString().c_str());
    return 1;
  }
  if ((*comm)->Check().code() != StatusCode::kPeerFailed) return 6;
  return (*comm)->Leave().ok() ? 0 : 5;
}

class AllReduceTest : public E2eTest {
 protected:
  struct Running {
    std::string group;
    int world_size;
    size_t num_cases;
    std::vector<pid_t> pids;
  };

  Running StartSweep(const std::string& tag, int world_size, const std::vector<Case>& cases) {
    Running r{UniqueGroup(tag + std::to_string(world_size)), world_size, cases.size(), {}};
    r.pids = SpawnWorkers("sweep", r.group, world_size, {{"cases", FormatCases(cases)}});
    return r;
  }

  void Finish(const Running& run) {
    std::vector<int> codes = WaitAll(run.pids, std::chrono::seconds(280));
    for (int r = 0; r < run.world_size; ++r) {
      ASSERT_EQ(codes[r], 0) << run.group << " rank " << r << " of " << run.world_size;
    }
    const std::string first = ReadFile(dir_ + "/" + run.group + "-r0.fp");
    EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), static_cast<long>(run.num_cases));
    for (int r = 1; r < run.world_size; ++r) {
      EXPECT_EQ(ReadFile(dir_ + "/" + run.group + "-r" + std::to_string(r) + ".fp"), first)
          << run.group << ": rank " << r << "'s outputs differ from rank 0's";
    }
  }

  void RunSweep(int world_size, const std::vector<Case>& cases) {
    Finish(StartSweep("sweep", world_size, cases));
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

TEST_F(AllReduceTest, WorldSize2SixtyFourMiB) {
  const int64_t n = 32 << 20;  // 64 MiB of 16-bit values
  std::vector<Case> cases;
  int i = 0;
  for (Codec codec : kAllCodecs) {
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

TEST_F(AllReduceTest, MismatchedSizesFailEveryRank) { RunWorkers("mismatch", 2); }

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(
      argc, argv,
      {{"sweep", &qr::testing::SweepWorker}, {"mismatch", &qr::testing::MismatchWorker}});
}
