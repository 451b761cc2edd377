// The host backend alone (no communicator): real processes join through a
// real broker, exchange their shm buffers and run many all-reduces in a row
// (flag colours reused across calls and rounds; one-shot phases alternating
// between two-shot calls) with results bit-identical to ReferenceAllReduce
// and ReferenceOneShotAllReduce; a stalled peer gives kTimeout and raises the
// group abort; ranks running different algorithms fail at once. The backend
// sees the group through MembershipControl, as in a communicator.
//
// Every rank's output of every call is the reference's: one rank (the call's
// index modulo the world size) checks it against the reference, and every
// rank writes a fingerprint of each of its outputs that the driver compares
// across ranks. Checking each call on every rank recomputed the same
// reference world-size times (three quarters of the test's CPU at world
// size 4) and proved nothing the fingerprints do not.
#include "comm/host_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/membership_control.h"
#include "common/status_macros.h"
#include "ipc/group_client.h"
#include "kernels/one_shot_reference.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

struct Member {
  std::unique_ptr<ipc::GroupMembership> group;
  std::unique_ptr<MembershipControl> control;  // what the backend sees of group
  std::unique_ptr<Backend> backend;
};

StatusOr<Member> JoinHost(const std::string& group, int rank, int ws, int64_t timeout_ms) {
  Member m;
  HostBackendOptions o;
  o.op_timeout_ms = timeout_ms;
  o.join_timeout_ms = 30000;
  QR_ASSIGN_OR_RETURN(m.backend, CreateHostBackend(rank, ws, o));
  ipc::JoinParams p;
  p.group = group;
  p.rank = rank;
  p.world_size = ws;
  p.device_id = m.backend->device_id();
  p.buffer_bytes = m.backend->buffer_bytes();
  p.timeout = std::chrono::milliseconds(30000);
  p.autostart = false;
  QR_ASSIGN_OR_RETURN(m.group, ipc::GroupMembership::Join(p));
  m.control = std::make_unique<MembershipControl>(*m.group);
  QR_RETURN_IF_ERROR(m.backend->Allocate(*m.control));
  QR_RETURN_IF_ERROR(m.group->PublishAndWaitReady(m.backend->blob_kind(), m.backend->blob()));
  QR_RETURN_IF_ERROR(m.backend->Connect(PeerBuffersOf(m.group->Members()), *m.control));
  return m;
}

int Fail(int rank, const char* what, const Status& s) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, s.ToString().c_str());
  return 1;
}

// One line per call: its index and size, and the fingerprint of the output.
void AddFingerprint(std::string* lines, int call, int64_t n, const uint16_t* out) {
  char line[96];
  std::snprintf(line, sizeof(line), "call %d n=%" PRId64 " %016" PRIx64 "\n", call, n,
                Fingerprint(out, static_cast<size_t>(n) * sizeof(uint16_t)));
  *lines += line;
}

int RepeatWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto m = JoinHost(a.group(), rank, ws, 30000);
  if (!m.ok()) return Fail(rank, "join", m.status());
  int call = 0;
  std::string fingerprints;
  // Sizes cross the 64-tile round boundary and shrink again, so stale flags
  // or slots of a longer earlier call would show.
  for (int64_t n : {int64_t{8}, int64_t{64 * 16384 + 8}, int64_t{16384}, int64_t{130 * 16384},
                    int64_t{24}, int64_t{5000}}) {
    for (Codec codec : kAllCodecs) {
      if (codec == Codec::kInt3 && ws != 2) continue;
      const int index = call;
      const uint64_t seed = 99 + static_cast<uint64_t>(call++);
      std::vector<uint16_t> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
      demo::FillInput(DType::kBFloat16, rank, seed, n, in.data());
      AllReduceCall c;
      c.in = in.data();
      c.out = out.data();
      c.count = static_cast<size_t>(n);
      c.dtype = DType::kBFloat16;
      c.codec = codec;
      Status s = m->backend->AllReduce(c);
      if (!s.ok()) return Fail(rank, "all_reduce", s);
      AddFingerprint(&fingerprints, index, n, out.data());
      if (index % ws != rank) continue;  // another rank checks this call
      kernels::TwoShotParams p;
      p.world_size = ws;
      p.codec = codec;
      p.dtype = DType::kBFloat16;
      p.num_elems = n;
      const demo::Verdict v = demo::Verify(p, seed, out.data());
      if (!v.ok()) {
        std::fprintf(stderr, "rank %d: n=%ld %s: %s\n", rank, static_cast<long>(n),
                     CodecName(codec), v.Describe().c_str());
        return 1;
      }
    }
  }
  if (!WriteFile(FingerprintPath(a), fingerprints)) {
    return Fail(rank, "writing fingerprints", Status());
  }
  m->backend.reset();
  Status s = m->group->Leave();
  return s.ok() ? 0 : Fail(rank, "leave", s);
}

// One-shot calls straight on the backend, every dtype variant, in place and
// not, sizes up to the region's capacity (fp16 only), with two-shot calls of other sizes
// in between and one-shot calls back to back (both phases, several times).
int OneShotWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto m = JoinHost(a.group(), rank, ws, 30000);
  if (!m.ok()) return Fail(rank, "join", m.status());
  const int64_t max = kernels::OneShotMaxElems(ws);
  struct Step {
    Algorithm algorithm;
    int64_t n;
  };
  const Step steps[] = {{Algorithm::kOneShot, 8},          {Algorithm::kOneShot, max},
                        {Algorithm::kTwoShot, 16392},      {Algorithm::kOneShot, 1000},
                        {Algorithm::kTwoShot, 8},          {Algorithm::kOneShot, 24},
                        {Algorithm::kOneShot, max - 8},    {Algorithm::kOneShot, 16392},
                        {Algorithm::kTwoShot, max + 4096}, {Algorithm::kOneShot, 4096}};
  int call = 0;
  std::string fingerprints;
  for (int d = 0; d < 3; ++d) {
    const DType dtype = d == 0 ? DType::kFloat16 : DType::kBFloat16;
    const bool cast = d == 1;
    for (const Step& step : steps) {
      // The region-sized calls once (fp16) keep the 8-process run short.
      if (d > 0 && step.n > 65536) continue;
      const uint64_t seed = 300 + static_cast<uint64_t>(call);
      const bool in_place = call % 2 == 1;
      const Codec codec = kAllCodecs[call % (ws == 2 ? 5 : 4)];
      const int index = call++;
      std::vector<uint16_t> in(static_cast<size_t>(step.n)), out(in.size(), 0xFFFF);
      demo::FillInput(dtype, rank, seed, step.n, in.data());
      AllReduceCall c;
      c.in = in.data();
      c.out = in_place ? in.data() : out.data();
      c.count = in.size();
      c.dtype = dtype;
      c.codec = codec;
      c.cast_bf16_to_fp16 = cast;
      c.algorithm = step.algorithm;
      Status s = m->backend->AllReduce(c);
      if (!s.ok()) return Fail(rank, "all_reduce", s);
      const uint16_t* result = in_place ? in.data() : out.data();
      AddFingerprint(&fingerprints, index, step.n, result);
      if (index % ws != rank) continue;  // another rank checks this call
      kernels::TwoShotParams p;
      p.world_size = ws;
      p.codec = codec;
      p.dtype = dtype;
      p.cast_bf16_to_fp16 = cast;
      p.num_elems = step.n;
      const demo::Verdict v = demo::Verify(p, seed, result, step.algorithm);
      if (!v.ok()) {
        std::fprintf(stderr, "rank %d: call %d, n=%ld %s %s %s: %s\n", rank, index,
                     static_cast<long>(step.n), AlgorithmName(step.algorithm), DTypeName(dtype),
                     CodecName(codec), v.Describe().c_str());
        return 1;
      }
    }
  }
  // Too big for the region: a local argument error that consumes no step.
  std::vector<uint16_t> big(static_cast<size_t>(max + 8));
  AllReduceCall c;
  c.in = big.data();
  c.out = big.data();
  c.count = big.size();
  c.algorithm = Algorithm::kOneShot;
  Status s = m->backend->AllReduce(c);
  if (s.code() != StatusCode::kInvalidArgument) return Fail(rank, "want INVALID_ARGUMENT", s);
  if (!m->backend->Failure().ok()) return Fail(rank, "argument error became a failure", s);
  c.count = 8;
  s = m->backend->AllReduce(c);
  if (!s.ok()) return Fail(rank, "all_reduce after the argument error", s);
  if (!WriteFile(FingerprintPath(a), fingerprints)) {
    return Fail(rank, "writing fingerprints", Status());
  }
  m->backend.reset();
  s = m->group->Leave();
  return s.ok() ? 0 : Fail(rank, "leave", s);
}

// Rank 0 runs one-shot, the others two-shot, the same size: everyone must
// fail with kPeerFailed naming the mismatch long before the 30 s op timeout.
int AlgorithmMismatchWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  auto m = JoinHost(a.group(), rank, a.world_size(), 30000);
  if (!m.ok()) return Fail(rank, "join", m.status());
  std::vector<uint16_t> buf(4096);
  AllReduceCall c;
  c.in = buf.data();
  c.out = buf.data();
  c.count = buf.size();
  c.algorithm = rank == 0 ? Algorithm::kOneShot : Algorithm::kTwoShot;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = m->backend->AllReduce(c);
  if (s.code() != StatusCode::kPeerFailed) return Fail(rank, "want PEER_FAILED", s);
  if (s.message().find("mismatch") == std::string::npos) return Fail(rank, "not a mismatch", s);
  if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
    return Fail(rank, "took until a timeout", s);
  }
  return 0;
}

// Rank 1 never calls; rank 0 must give up at its op timeout with kTimeout,
// and raise the abort so that rank 1 sees the group fail. --algorithm=1:
// rank 0's call is one-shot.
int TimeoutWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  auto m = JoinHost(a.group(), rank, a.world_size(), 300);
  if (!m.ok()) return Fail(rank, "join", m.status());
  if (rank == 0) {
    std::vector<uint16_t> buf(4096);
    AllReduceCall c;
    c.in = buf.data();
    c.out = buf.data();
    c.count = buf.size();
    c.algorithm = static_cast<Algorithm>(a.GetInt("algorithm", 0));
    const auto t0 = std::chrono::steady_clock::now();
    Status s = m->backend->AllReduce(c);
    const auto waited = std::chrono::steady_clock::now() - t0;
    if (s.code() != StatusCode::kTimeout) return Fail(rank, "want TIMEOUT", s);
    if (waited > std::chrono::seconds(2)) return Fail(rank, "waited too long", s);
    // The backend reports and keeps nothing (the communicator keeps the
    // failure); the group is aborted, so a later call stops at once.
    if (!m->backend->Failure().ok()) return Fail(rank, "the backend kept the failure", s);
    if (m->group->Check().code() != StatusCode::kPeerFailed) return Fail(rank, "no abort", s);
    s = m->backend->AllReduce(c);
    if (s.code() != StatusCode::kPeerFailed) return Fail(rank, "later call not stopped", s);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (m->group->Check().ok()) {
      if (std::chrono::steady_clock::now() > deadline) return Fail(rank, "no abort", Status());
      usleep(1000);
    }
  }
  return 0;
}

class HostBackendTest : public E2eTest {
 protected:
  // Runs a worker that checks its share of the calls and writes the
  // fingerprints of all its outputs; every rank's must equal rank 0's.
  void RunAndCompareOutputs(const std::string& worker, int world_size) {
    const std::string group = UniqueGroup(worker + std::to_string(world_size));
    std::vector<int> codes =
        WaitAll(SpawnWorkers(worker, group, world_size, {}), std::chrono::seconds(200));
    for (int r = 0; r < world_size; ++r) {
      ASSERT_EQ(codes[r], 0) << worker << " rank " << r << " of " << world_size
                             << " failed (-1: killed at the deadline)";
    }
    const std::string first = ExpectSameOutputsOnEveryRank(group, world_size);
    // Each rank checked some calls against the reference.
    EXPECT_GE(std::count(first.begin(), first.end(), '\n'), 2 * world_size) << first;
  }
};

TEST_F(HostBackendTest, RepeatedCallsAreBitIdenticalToReferenceWs2) {
  RunAndCompareOutputs("repeat", 2);
}
TEST_F(HostBackendTest, RepeatedCallsAreBitIdenticalToReferenceWs4) {
  RunAndCompareOutputs("repeat", 4);
}
TEST_F(HostBackendTest, TimedOutWaitRaisesGroupAbort) {
  RunWorkers("timeout", 2, {}, std::chrono::seconds(200));
}
TEST_F(HostBackendTest, TimedOutOneShotWaitRaisesGroupAbort) {
  RunWorkers("timeout", 2, {{"algorithm", "1"}}, std::chrono::seconds(200));
}
TEST_F(HostBackendTest, OneShotBetweenTwoShotCallsIsBitIdenticalToReferenceWs2) {
  RunAndCompareOutputs("one-shot", 2);
}
TEST_F(HostBackendTest, OneShotBetweenTwoShotCallsIsBitIdenticalToReferenceWs8) {
  RunAndCompareOutputs("one-shot", 8);
}
TEST_F(HostBackendTest, RanksRunningDifferentAlgorithmsFailAtOnce) {
  RunWorkers("algorithm-mismatch", 4, {}, std::chrono::seconds(60));
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv,
                              {{"repeat", &qr::testing::RepeatWorker},
                               {"timeout", &qr::testing::TimeoutWorker},
                               {"one-shot", &qr::testing::OneShotWorker},
                               {"algorithm-mismatch", &qr::testing::AlgorithmMismatchWorker}});
}
