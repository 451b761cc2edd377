// The fused all-reduce + residual add + RMSNorm through the real GPU stack
// (docs/fused.md): one process per rank, a private broker, the C++
// communicator API, world sizes 2 and 4. Eager calls (one-shot and two-shot
// sizes, in place as vLLM calls it, no residual) and a captured graph
// replayed with new inputs must equal the host reference bit for bit. With
// one GPU the ranks share it under NVIDIA MPS with QR_ALLOW_SHARED_DEVICE=1
// (tools/gpu/run_suite.sh's part "fused" sets up both).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/policy.h"
#include "common/status_macros.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "kernels/rmsnorm_reference.h"
#include "tests/e2e/harness.h"
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

constexpr float kEps = 1e-6f;

struct Shape {
  size_t tokens, hidden;
  Regime regime;
  DType dtype;
  bool in_place;  // residual_out = residual, norm_out = in
  bool residual;
};

// Every rank's inputs of call `seed`: partial sums FillInput(rank), the
// residual and weight as two more "ranks".
std::vector<uint16_t> Data(DType dtype, int who, uint64_t seed, size_t n) {
  std::vector<uint16_t> v(n);
  demo::FillInput(dtype, who, seed, static_cast<int64_t>(n), v.data());
  return v;
}

// The reference's (residual_out, norm_out) for the group, as rank 0 sees it.
std::pair<std::vector<uint16_t>, std::vector<uint16_t>> Want(const Shape& s, int ws,
                                                             uint64_t seed) {
  const size_t n = s.tokens * s.hidden;
  auto config = LoadConfigFromEnv(GpuPlatform());
  const Codec codec = CodecForRegime(s.regime);
  kernels::TwoShotParams p{ws, codec, s.dtype, false, static_cast<int64_t>(n)};
  const Algorithm algorithm = ChooseAlgorithm(config.ok() ? *config : Config{}, n * 2, ws,
                                              WorkFormatOf(s.dtype, false), codec);
  std::vector<std::vector<uint16_t>> in(ws), ro(ws, std::vector<uint16_t>(n)),
      no(ws, std::vector<uint16_t>(n));
  const std::vector<uint16_t> res = Data(s.dtype, 100, seed, n),
                              w = Data(s.dtype, 101, seed, s.hidden);
  std::vector<const uint16_t*> ins, ress;
  std::vector<uint16_t*> ros, nos;
  for (int r = 0; r < ws; ++r) {
    in[r] = Data(s.dtype, r, seed, n);
    ins.push_back(in[r].data());
    ress.push_back(s.residual ? res.data() : nullptr);
    ros.push_back(ro[r].data());
    nos.push_back(no[r].data());
  }
  Status st = kernels::ReferenceAllReduceResidualRmsNorm(
      p, algorithm, static_cast<int64_t>(s.tokens), static_cast<int64_t>(s.hidden), kEps,
      ins.data(), ress.data(), w.data(), ros.data(), nos.data());
  if (!st.ok()) return {};
  return {ro[0], no[0]};
}

struct Device {
  void *in = nullptr, *res = nullptr, *w = nullptr, *ro = nullptr, *no = nullptr;
  ~Device() {
    for (void* p : {in, res, w, ro, no}) gpu::Free(p);
  }
};

// Uploads call `seed`'s data and enqueues (or, capturing, records) the call.
Status Enqueue(Communicator& c, const Shape& s, uint64_t seed, Device& d, void* stream, bool upload,
               void** ro, void** no) {
  const size_t n = s.tokens * s.hidden;
  if (upload) {
    QR_RETURN_IF_ERROR(gpu::Memcpy(d.in, Data(s.dtype, c.rank(), seed, n).data(), n * 2));
    QR_RETURN_IF_ERROR(gpu::Memcpy(d.res, Data(s.dtype, 100, seed, n).data(), n * 2));
    QR_RETURN_IF_ERROR(gpu::Memcpy(d.w, Data(s.dtype, 101, seed, s.hidden).data(), s.hidden * 2));
  }
  *ro = s.in_place ? d.res : d.ro;
  *no = s.in_place ? d.in : d.no;
  return c.AllReduceResidualRmsNorm(d.in, s.residual ? d.res : nullptr, d.w, *ro, *no, s.tokens,
                                    s.hidden, kEps, s.dtype, s.regime, false, stream);
}

int Check(const Shape& s, int ws, uint64_t seed, void* ro, void* no, int rank) {
  const size_t n = s.tokens * s.hidden;
  std::vector<uint16_t> got_ro(n), got_no(n);
  WORKER_CHECK(gpu::Memcpy(got_ro.data(), ro, n * 2).ok(), 20, "copy out");
  WORKER_CHECK(gpu::Memcpy(got_no.data(), no, n * 2).ok(), 20, "copy out");
  const auto want = Want(s, ws, seed);
  WORKER_CHECK(got_ro == want.first, 21, "rank %d: %zux%zu residual_out differs", rank, s.tokens,
               s.hidden);
  WORKER_CHECK(got_no == want.second, 22, "rank %d: %zux%zu norm_out differs", rank, s.tokens,
               s.hidden);
  return 0;
}

int FusedWorker(const WorkerArgs& a) {
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
  const size_t max_elems = 256 * 8192;
  Device d;
  for (void** p : {&d.in, &d.res, &d.ro, &d.no}) {
    auto m = gpu::Malloc(max_elems * 2);
    WORKER_CHECK(m.ok(), 5, "malloc");
    *p = *m;
  }
  auto w = gpu::Malloc(8192 * 2);
  WORKER_CHECK(w.ok(), 5, "malloc");
  d.w = *w;
  const Shape shapes[] = {
      {1, 4096, Regime::kFp, DType::kFloat16, true, true},
      {7, 8192, Regime::kFp, DType::kBFloat16, false, true},
      {256, 8192, Regime::kInt4, DType::kFloat16, true, true},  // 4 MiB: two-shot at ws 4
      {256, 8192, Regime::kFp, DType::kBFloat16, false, false},
      {33, 4096, Regime::kInt8, DType::kBFloat16, true, true},
  };
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    void *ro = nullptr, *no = nullptr;
    Status st = Enqueue(**comm, s, seed, d, *stream, true, &ro, &no);
    WORKER_CHECK(st.ok(), 10, "rank %d: call: %s", a.rank(), st.ToString().c_str());
    WORKER_CHECK(gpu::StreamSynchronize(*stream).ok() && (*comm)->Check().ok(), 11, "sync");
    const int rc = Check(s, a.world_size(), seed++, ro, no, a.rank());
    if (rc != 0) return rc;
  }
  // A captured graph of two fused calls (one-shot and two-shot sized),
  // replayed with new inputs each time: the first shape's buffers are the
  // first 1 x 4096 of the second's.
  const Shape g1{1, 4096, Regime::kFp, DType::kFloat16, true, true};
  void *ro = nullptr, *no = nullptr;
  WORKER_CHECK(gpu::BeginCapture(*stream).ok(), 30, "capture");
  Status st = Enqueue(**comm, g1, 0, d, *stream, false, &ro, &no);
  auto graph = gpu::EndCapture(*stream);
  WORKER_CHECK(st.ok() && graph.ok(), 31, "rank %d: capture: %s", a.rank(), st.ToString().c_str());
  for (int rep = 0; rep < 5; ++rep) {
    const uint64_t k = 700 + rep;
    const size_t n = g1.tokens * g1.hidden;
    WORKER_CHECK(gpu::Memcpy(d.in, Data(g1.dtype, a.rank(), k, n).data(), n * 2).ok(), 32, "in");
    WORKER_CHECK(gpu::Memcpy(d.res, Data(g1.dtype, 100, k, n).data(), n * 2).ok(), 32, "in");
    WORKER_CHECK(gpu::Memcpy(d.w, Data(g1.dtype, 101, k, g1.hidden).data(), g1.hidden * 2).ok(), 32,
                 "in");
    WORKER_CHECK(gpu::GraphLaunch(*graph, *stream).ok(), 33, "replay");
    WORKER_CHECK(gpu::StreamSynchronize(*stream).ok(), 34, "sync");
    const int rc = Check(g1, a.world_size(), k, ro, no, a.rank());
    if (rc != 0) return rc;
  }
  gpu::GraphDestroy(*graph);
  WORKER_CHECK((*comm)->Check().ok(), 38, "check");
  gpu::StreamDestroy(*stream);
  return (*comm)->Leave().ok() ? 0 : 39;
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

// Skips before E2eTest starts a broker when the GPUs are missing.
class FusedBackendTest : public E2eTest {
 protected:
  void Run(int world_size) {
    std::string why;
    if (!EnoughGpus(world_size, &why)) GTEST_SKIP() << why;
    RunWorkers("fused", world_size, {}, std::chrono::seconds(240));
  }
};

TEST_F(FusedBackendTest, WorldSize2EqualsReferenceAndGraphReplays) { Run(2); }
TEST_F(FusedBackendTest, WorldSize4EqualsReferenceAndGraphReplays) { Run(4); }

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv, {{"fused", &qr::testing::FusedWorker}});
}
