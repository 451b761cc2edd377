// Reduce-scatter and all-gather through the real GPU stack (docs/
// collectives.md): one process per rank, a private broker, the communicator's
// ReduceScatter / AllGather (what qr_reduce_scatter_ex / qr_all_gather_ex
// call), world sizes 2, 4 and 8. Eager calls of every regime, fp16 / bf16 /
// bf16 with the cast, sizes the policy sends one-shot and two-shot, in place
// and not, and a captured graph of both replayed with new inputs must equal
// the host reference bit for bit; a killed rank makes the survivor's
// reduce-scatters end with kPeerFailed (QR_PEER_FAILED). With fewer GPUs than
// ranks they share them under NVIDIA MPS with QR_ALLOW_SHARED_DEVICE=1
// (tools/gpu/run_suite.sh's part "collectives" sets up both).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/policy.h"
#include "common/status_macros.h"
#include "kernels/all_gather_reference.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "kernels/reduce_scatter_reference.h"
#include "tests/e2e/harness.h"
#include "tests/util/process.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

#define WORKER_CHECK(cond, code, ...)    \
  do {                                   \
    if (!(cond)) {                       \
      std::fprintf(stderr, __VA_ARGS__); \
      std::fprintf(stderr, "\n");        \
      return code;                       \
    }                                    \
  } while (0)

struct Shape {
  Collective kind;
  Regime regime;
  DType dtype;
  bool cast;
  size_t count;  // per rank
  bool in_place;
};

const char* KindName(Collective kind) {
  return kind == Collective::kReduceScatter ? "reduce-scatter" : "all-gather";
}

// Rank `rank`'s input of call `seed`.
std::vector<uint16_t> Input(const Shape& s, int ws, int rank, uint64_t seed) {
  const size_t n = s.kind == Collective::kReduceScatter ? ws * s.count : s.count;
  std::vector<uint16_t> v(n);
  demo::FillInput(s.dtype, rank, seed, static_cast<int64_t>(n), v.data());
  return v;
}

// What rank `rank` must get: the reference of the algorithm the policy
// picks for the whole message under this process's environment.
std::vector<uint16_t> Want(const Shape& s, int ws, int rank, uint64_t seed) {
  auto config = LoadConfigFromEnv(GpuPlatform());
  const Codec codec = CodecForRegime(s.regime);
  const bool cast = s.cast && s.dtype == DType::kBFloat16;
  const Algorithm algorithm = ChooseAlgorithm(config.ok() ? *config : Config{}, ws * s.count * 2,
                                              ws, WorkFormatOf(s.dtype, cast), codec);
  const kernels::TwoShotParams p{ws, codec, s.dtype, cast, static_cast<int64_t>(s.count)};
  std::vector<std::vector<uint16_t>> in(ws), out(ws);
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < ws; ++r) {
    in[r] = Input(s, ws, r, seed);
    out[r].resize(s.kind == Collective::kAllGather ? ws * s.count : s.count);
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  const Status st =
      s.kind == Collective::kReduceScatter
          ? kernels::ReferenceReduceScatter(kernels::ReduceScatterParamsFor(p, algorithm),
                                            ins.data(), outs.data())
          : kernels::ReferenceAllGather(kernels::AllGatherParamsFor(p, algorithm), ins.data(),
                                        outs.data());
  if (!st.ok()) return {};
  return out[rank];
}

// A rank's buffers, large enough for every shape: `whole` holds the
// reduce-scatter's input or the all-gather's output, `part` the other.
struct Device {
  void* whole = nullptr;
  void* part = nullptr;
  ~Device() {
    gpu::Free(whole);
    gpu::Free(part);
  }
};

// in / out of `s` on rank `rank` in `d` (NCCL's in-place forms).
void Pointers(const Shape& s, int rank, const Device& d, void** in, void** out) {
  uint16_t* whole = static_cast<uint16_t*>(d.whole);
  uint16_t* mine = whole + rank * s.count;
  if (s.kind == Collective::kReduceScatter) {
    *in = whole;
    *out = s.in_place ? mine : d.part;
  } else {
    *out = whole;
    *in = s.in_place ? mine : d.part;
  }
}

// Uploads call `seed`'s input (when `upload`) and enqueues (or, capturing,
// records) the call.
Status Enqueue(Communicator& c, const Shape& s, uint64_t seed, const Device& d, void* stream,
               bool upload) {
  void *in = nullptr, *out = nullptr;
  Pointers(s, c.rank(), d, &in, &out);
  if (upload) {
    const std::vector<uint16_t> v = Input(s, c.world_size(), c.rank(), seed);
    QR_RETURN_IF_ERROR(gpu::Memcpy(in, v.data(), v.size() * 2));
  }
  return s.kind == Collective::kReduceScatter
             ? c.ReduceScatter(in, out, s.count, s.dtype, s.regime, s.cast, stream)
             : c.AllGather(in, out, s.count, s.dtype, s.regime, s.cast, stream);
}

int Check(const Shape& s, int ws, uint64_t seed, const Device& d, int rank) {
  void *in = nullptr, *out = nullptr;
  Pointers(s, rank, d, &in, &out);
  const std::vector<uint16_t> want = Want(s, ws, rank, seed);
  WORKER_CHECK(!want.empty(), 20, "reference failed");
  std::vector<uint16_t> got(want.size());
  WORKER_CHECK(gpu::Memcpy(got.data(), out, got.size() * 2).ok(), 21, "copy out");
  WORKER_CHECK(got == want, 22, "rank %d: %s %s %s%s count %zu%s differs from the reference", rank,
               KindName(s.kind), RegimeName(s.regime), DTypeName(s.dtype), s.cast ? " (cast)" : "",
               s.count, s.in_place ? " in place" : "");
  return 0;
}

constexpr size_t kMaxCount = (size_t{2} << 20) / 2 + 8;  // per rank; whole buffers ws x this

int RsAgWorker(const WorkerArgs& a) {
  const int n_gpus = gpu::DeviceCount();
  const int ws = a.world_size();
  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = ws;
  o.device = n_gpus > 0 ? a.rank() % n_gpus : a.rank();
  o.timeout_ms = 60000;
  WORKER_CHECK(gpu::SetDevice(o.device).ok(), 2, "set device");
  auto comm = Communicator::Join(o);
  WORKER_CHECK(comm.ok(), 3, "rank %d: join: %s", a.rank(), comm.status().ToString().c_str());
  auto stream = gpu::StreamCreate();
  WORKER_CHECK(stream.ok(), 4, "stream");
  Device d;
  for (auto [p, bytes] : {std::pair<void**, size_t>{&d.whole, ws * kMaxCount * 2},
                          std::pair<void**, size_t>{&d.part, kMaxCount * 2}}) {
    auto m = gpu::Malloc(bytes);
    WORKER_CHECK(m.ok(), 5, "malloc");
    *p = *m;
  }
  std::vector<Shape> shapes;
  const Regime quantized = ws == 2 ? Regime::kInt3 : Regime::kInt6;
  for (Collective kind : {Collective::kReduceScatter, Collective::kAllGather}) {
    for (Regime regime : {Regime::kFp, Regime::kInt8, Regime::kInt4, quantized}) {
      // Small (one-shot where the policy says so); a whole message just
      // above 4 MiB, above every one-shot ceiling (kernels/geometry.h
      // OneShotMaxBytes), not a whole number of tiles; and one just below
      // it, with the cast; one of each kind in place.
      shapes.push_back({kind, regime, DType::kFloat16, false, 1000, regime == Regime::kFp});
      shapes.push_back({kind, regime, DType::kBFloat16, false, (2u << 20) / ws + 8, false});
      shapes.push_back(
          {kind, regime, DType::kBFloat16, true, (2u << 20) / ws - 8, regime != Regime::kFp});
    }
  }
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Status st = Enqueue(**comm, s, seed, d, *stream, true);
    WORKER_CHECK(st.ok(), 10, "rank %d: %s: %s", a.rank(), KindName(s.kind), st.ToString().c_str());
    WORKER_CHECK(gpu::StreamSynchronize(*stream).ok(), 11, "sync");
    st = (*comm)->Check();
    WORKER_CHECK(st.ok(), 12, "rank %d: check: %s", a.rank(), st.ToString().c_str());
    const int rc = Check(s, ws, seed++, d, a.rank());
    if (rc != 0) return rc;
  }
  // A captured graph of a reduce-scatter and an all-gather (the
  // sequence-parallel pair), replayed with new inputs each time: the
  // reduce-scatter in place in `d`, the all-gather out of place in `d2`.
  const Shape rs{
      Collective::kReduceScatter, Regime::kInt4, DType::kBFloat16, false, 4096 * 8, true};
  const Shape ag{Collective::kAllGather, Regime::kFp, DType::kBFloat16, false, 4096 * 8, false};
  Device d2;
  for (auto [p, bytes] : {std::pair<void**, size_t>{&d2.whole, ws * kMaxCount * 2},
                          std::pair<void**, size_t>{&d2.part, kMaxCount * 2}}) {
    auto m = gpu::Malloc(bytes);
    WORKER_CHECK(m.ok(), 5, "malloc");
    *p = *m;
  }
  WORKER_CHECK(gpu::BeginCapture(*stream).ok(), 30, "capture");
  Status st = Enqueue(**comm, rs, 0, d, *stream, false);
  if (st.ok()) st = Enqueue(**comm, ag, 0, d2, *stream, false);
  auto graph = gpu::EndCapture(*stream);
  WORKER_CHECK(st.ok() && graph.ok(), 31, "rank %d: capture: %s", a.rank(), st.ToString().c_str());
  for (int rep = 0; rep < 5; ++rep) {
    const uint64_t k = 700 + rep;
    const std::vector<uint16_t> v1 = Input(rs, ws, a.rank(), k), v2 = Input(ag, ws, a.rank(), k);
    void *in1 = nullptr, *out1 = nullptr, *in2 = nullptr, *out2 = nullptr;
    Pointers(rs, a.rank(), d, &in1, &out1);
    Pointers(ag, a.rank(), d2, &in2, &out2);
    WORKER_CHECK(gpu::Memcpy(in1, v1.data(), v1.size() * 2).ok(), 32, "in");
    WORKER_CHECK(gpu::Memcpy(in2, v2.data(), v2.size() * 2).ok(), 32, "in");
    WORKER_CHECK(gpu::GraphLaunch(*graph, *stream).ok(), 33, "replay");
    WORKER_CHECK(gpu::StreamSynchronize(*stream).ok(), 34, "sync");
    int rc = Check(rs, ws, k, d, a.rank());
    if (rc == 0) rc = Check(ag, ws, k, d2, a.rank());
    if (rc != 0) return rc;
  }
  gpu::GraphDestroy(*graph);
  WORKER_CHECK((*comm)->Check().ok(), 38, "check");
  gpu::StreamDestroy(*stream);
  return (*comm)->Leave().ok() ? 0 : 39;
}

std::string PathOf(const WorkerArgs& a, const std::string& what, int rank) {
  return a.dir() + "/" + a.group() + "-" + what + "-r" + std::to_string(rank);
}

// Streams reduce-scatters until the group fails (the test kills rank 1);
// rank 0 records the status that ended it.
int KillWorker(const WorkerArgs& a) {
  const int n_gpus = gpu::DeviceCount();
  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = a.world_size();
  o.device = n_gpus > 0 ? a.rank() % n_gpus : a.rank();
  o.timeout_ms = 60000;
  WORKER_CHECK(gpu::SetDevice(o.device).ok(), 2, "set device");
  auto comm = Communicator::Join(o);
  WORKER_CHECK(comm.ok(), 3, "rank %d: join: %s", a.rank(), comm.status().ToString().c_str());
  auto stream = gpu::StreamCreate();
  WORKER_CHECK(stream.ok(), 4, "stream");
  const size_t count = 1 << 20;
  Device d;
  d.whole = *gpu::Malloc(a.world_size() * count * 2);
  d.part = *gpu::Malloc(count * 2);
  WORKER_CHECK(gpu::Memset(d.whole, 0x3C, a.world_size() * count * 2).ok(), 5, "memset");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Status s;
  for (int i = 0; std::chrono::steady_clock::now() < give_up; ++i) {
    s = (*comm)->ReduceScatter(d.whole, d.part, count, DType::kFloat16, Regime::kInt4, false,
                               *stream);
    if (!s.ok()) break;
    if (i % 8 == 7) {
      WORKER_CHECK(gpu::StreamSynchronize(*stream).ok(), 6, "sync");
      s = (*comm)->Check();
      if (!s.ok()) break;
    }
    if (i == 40 && !WriteFile(PathOf(a, "progress", a.rank()), "40\n")) return 7;
  }
  WORKER_CHECK(gpu::StreamSynchronize(*stream).ok(), 8, "final sync");
  WORKER_CHECK(WriteFile(PathOf(a, "fail", a.rank()), std::to_string(static_cast<int>(s.code()))),
               9, "write");
  WORKER_CHECK(s.code() == StatusCode::kPeerFailed, 10, "rank %d: stream ended with %s", a.rank(),
               s.ToString().c_str());
  WORKER_CHECK(
      (*comm)->AllGather(d.part, d.whole, count, DType::kFloat16, Regime::kFp, false, *stream)
              .code() == StatusCode::kPeerFailed,
      11, "later call not refused");
  gpu::StreamDestroy(*stream);
  (*comm)->Leave().IgnoreError();
  return 0;
}

// world_size GPUs, or ranks sharing the GPUs there are in the testing mode.
bool EnoughGpus(int world_size, std::string* why) {
  const int n = gpu::DeviceCount();
  if (n >= world_size) return true;
  auto config = LoadConfigFromEnv(GpuPlatform());
  if (n > 0 && config.ok() && config->allow_shared_device) return true;
  *why = "needs " + std::to_string(world_size) +
         " GPUs, or QR_ALLOW_SHARED_DEVICE=1 under NVIDIA MPS (tools/gpu/run_suite.sh); found " +
         std::to_string(n);
  return false;
}

class CollectivesBackendTest : public E2eTest {
 protected:
  void Run(int world_size) {
    std::string why;
    if (!EnoughGpus(world_size, &why)) GTEST_SKIP() << why;
    RunWorkers("rsag", world_size, {}, std::chrono::seconds(300));
  }
};

TEST_F(CollectivesBackendTest, WorldSize2EqualsReferenceAndGraphReplays) { Run(2); }
TEST_F(CollectivesBackendTest, WorldSize4EqualsReferenceAndGraphReplays) { Run(4); }
TEST_F(CollectivesBackendTest, WorldSize8EqualsReferenceAndGraphReplays) { Run(8); }

TEST_F(CollectivesBackendTest, KilledRankEndsSurvivorsReduceScatterWithPeerFailed) {
  std::string why;
  if (!EnoughGpus(2, &why)) GTEST_SKIP() << why;
  const std::string group = UniqueGroup("rskill");
  std::vector<pid_t> pids = SpawnWorkers("kill", group, 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < 2; ++r) {
    const std::string p = dir_ + "/" + group + "-progress-r" + std::to_string(r);
    while (::access(p.c_str(), F_OK) != 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank " << r << " never streamed";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
  ASSERT_EQ(*WaitExit(pids[1], std::chrono::seconds(10)), 128 + SIGKILL);
  ASSERT_EQ(*WaitExit(pids[0], std::chrono::seconds(60)), 0);
  EXPECT_EQ(ReadFile(dir_ + "/" + group + "-fail-r0"),
            std::to_string(static_cast<int>(StatusCode::kPeerFailed)));
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(
      argc, argv, {{"rsag", &qr::testing::RsAgWorker}, {"kill", &qr::testing::KillWorker}});
}
