// The host backend alone (no communicator): real processes join through a
// real broker, exchange their shm buffers and run many all-reduces in a row
// (flag colours reused across calls and rounds) with results bit-identical
// to ReferenceAllReduce; a group abort stops a waiting rank within a second.
#include "comm/host_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "ipc/group_client.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

struct Member {
  std::unique_ptr<ipc::GroupMembership> group;
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
  QR_RETURN_IF_ERROR(m.backend->Allocate(*m.group));
  QR_RETURN_IF_ERROR(m.group->PublishAndWaitReady(m.backend->blob_kind(), m.backend->blob()));
  QR_RETURN_IF_ERROR(m.backend->Connect(m.group->Members(), *m.group));
  return m;
}

int Fail(int rank, const char* what, const Status& s) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, s.ToString().c_str());
  return 1;
}

int RepeatWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto m = JoinHost(a.group(), rank, ws, 30000);
  if (!m.ok()) return Fail(rank, "join", m.status());
  int call = 0;
  // Sizes cross the 64-tile round boundary and shrink again, so stale flags
  // or slots of a longer earlier call would show.
  for (int64_t n : {int64_t{8}, int64_t{64 * 16384 + 8}, int64_t{16384}, int64_t{130 * 16384},
                    int64_t{24}, int64_t{5000}}) {
    for (Codec codec : kAllCodecs) {
      if (codec == Codec::kInt3 && ws != 2) continue;
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
  m->backend.reset();
  Status s = m->group->Leave();
  return s.ok() ? 0 : Fail(rank, "leave", s);
}

// Rank 1 never calls; rank 0 must give up at its op timeout with kTimeout,
// and raise the abort so that rank 1 sees the group fail.
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
    const auto t0 = std::chrono::steady_clock::now();
    Status s = m->backend->AllReduce(c);
    const auto waited = std::chrono::steady_clock::now() - t0;
    if (s.code() != StatusCode::kTimeout) return Fail(rank, "want TIMEOUT", s);
    if (waited > std::chrono::seconds(2)) return Fail(rank, "waited too long", s);
    if (m->backend->Check().code() != StatusCode::kTimeout) return Fail(rank, "not sticky", s);
    if (m->backend->AllReduce(c).code() != StatusCode::kTimeout) return 1;
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (m->group->Check().ok()) {
      if (std::chrono::steady_clock::now() > deadline) return Fail(rank, "no abort", Status());
      usleep(1000);
    }
  }
  return 0;
}

class HostBackendTest : public E2eTest {};

TEST_F(HostBackendTest, RepeatedCallsAreBitIdenticalToReferenceWs2) {
  RunWorkers("repeat", 2, {}, std::chrono::seconds(200));
}
TEST_F(HostBackendTest, RepeatedCallsAreBitIdenticalToReferenceWs4) {
  RunWorkers("repeat", 4, {}, std::chrono::seconds(200));
}
TEST_F(HostBackendTest, TimedOutWaitRaisesGroupAbort) {
  RunWorkers("timeout", 2, {}, std::chrono::seconds(200));
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(
      argc, argv,
      {{"repeat", &qr::testing::RepeatWorker}, {"timeout", &qr::testing::TimeoutWorker}});
}
