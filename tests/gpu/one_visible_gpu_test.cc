// One visible GPU per process (CUDA_VISIBLE_DEVICES per rank, as vLLM and
// SGLang's SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS run their ranks): every rank
// joins on its device 0, the group's topology check (comm/topology.h) decides
// every pair of distinct GPUs by PCI bus id although no rank sees any peer's
// GPU, and a world-size-4 group all-reduces bit for bit like the reference.
// Each rank also asks kernels/platform/device_info.h about every GPU of the
// machine that it cannot see; on NVIDIA the answer must come from NVML and
// equal what the driver process, which sees them all, gets from the runtime.
//
// On 4+ GPUs rank r has GPU r; on fewer (one H200 under MPS in
// tools/gpu/run_suite.sh) rank r has GPU r % n and ranks share GPUs
// (QR_ALLOW_SHARED_DEVICE=1): with one GPU no pair needs a path, and the
// test still covers joining and running with one visible GPU per process
// above world size 2 and resolving the hidden-peer query through NVML.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/policy.h"
#include "kernels/platform/device_info.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "tests/e2e/cases.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

#define WORKER_CHECK(cond, code, ...)              \
  do {                                             \
    if (!(cond)) {                                 \
      std::fprintf(stderr, "rank %d: ", a.rank()); \
      std::fprintf(stderr, __VA_ARGS__);           \
      std::fprintf(stderr, "\n");                  \
      return code;                                 \
    }                                              \
  } while (0)

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');) out.push_back(item);
  return out;
}

// --pcis: every GPU of the machine; --matrix: the runtime's answers of the
// driver process, row-major '1'/'0' ('-' on the diagonal).
int OneVisibleWorker(const WorkerArgs& a) {
  WORKER_CHECK(gpu::DeviceCount() == 1, 2, "sees %d GPUs, want exactly 1", gpu::DeviceCount());
  auto own = gpu::PciBusId(0);
  WORKER_CHECK(own.ok(), 3, "pci id: %s", own.status().ToString().c_str());
  const std::vector<std::string> pcis = Split(a.Get("pcis"));
  const std::string matrix = a.Get("matrix");
  const int n = static_cast<int>(pcis.size());
  int self = -1;
  for (int i = 0; i < n; ++i) self = pcis[i] == *own ? i : self;
  WORKER_CHECK(self >= 0, 4, "own GPU %s is not among the machine's", own->c_str());
  for (int j = 0; j < n; ++j) {
    if (j == self) continue;
    auto answer = gpu::PeerAccessByPciBusId(*own, pcis[j]);
    WORKER_CHECK(answer.ok(), 5, "%s", answer.status().ToString().c_str());
    WORKER_CHECK(answer->can.has_value(), 6, "no answer for hidden GPU %s", pcis[j].c_str());
    if (GpuPlatform() == Platform::kNvidia) {
      WORKER_CHECK(answer->source == "nvml", 7, "answer from '%s'", answer->source.c_str());
    }
    const bool want = matrix[static_cast<size_t>(self * n + j)] == '1';
    WORKER_CHECK(*answer->can == want, 8, "%s -> %s: %d here, %d with both visible", own->c_str(),
                 pcis[j].c_str(), *answer->can, want);
  }
  if (n == 1 && GpuPlatform() == Platform::kNvidia) {
    // Nothing is hidden on a one-GPU machine; NVML, which the join asks
    // about hidden GPUs, must still find ours by its PCI bus id.
    WORKER_CHECK(gpu::NvmlKnowsGpu(*own), 9, "NVML did not resolve %s by PCI bus id", own->c_str());
  }

  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = a.world_size();
  o.device = 0;
  o.timeout_ms = 60000;
  auto comm = Communicator::Join(o);
  WORKER_CHECK(comm.ok(), 10, "join: %s", comm.status().ToString().c_str());
  auto stream = gpu::StreamCreate();
  WORKER_CHECK(stream.ok(), 11, "stream");
  for (int64_t count : {int64_t{8192}, int64_t{3 << 20}}) {  // one-shot and two-shot
    Case c;
    c.codec = Codec::kInt4;
    c.count = count;
    c.seed = 77;
    std::vector<uint16_t> in(count), out(count);
    demo::FillInput(c.dtype, a.rank(), c.seed, count, in.data());
    auto din = gpu::Malloc(count * 2), dout = gpu::Malloc(count * 2);
    WORKER_CHECK(din.ok() && dout.ok(), 12, "malloc");
    WORKER_CHECK(gpu::Memcpy(*din, in.data(), count * 2).ok(), 13, "copy in");
    Status s = (*comm)->AllReduce(*din, *dout, count, c.dtype, Regime::kInt4, false, *stream);
    WORKER_CHECK(s.ok(), 14, "all-reduce: %s", s.ToString().c_str());
    WORKER_CHECK(gpu::StreamSynchronize(*stream).ok(), 15, "sync");
    WORKER_CHECK((*comm)->Check().ok(), 16, "check");
    WORKER_CHECK(gpu::Memcpy(out.data(), *dout, count * 2).ok(), 17, "copy out");
    gpu::Free(*din);
    gpu::Free(*dout);
    const demo::Verdict v = VerifyCase(
        c, a.world_size(), AlgorithmOf((*comm)->config(), c, a.world_size()), out.data());
    WORKER_CHECK(v.ok(), 18, "count %lld: %s", static_cast<long long>(count), v.Describe().c_str());
  }
  gpu::StreamDestroy(*stream);
  return (*comm)->Leave().ok() ? 0 : 19;
}

class OneVisibleGpuTest : public E2eTest {
 protected:
  void SetUp() override {
    if (gpu::DeviceCount() == 0) GTEST_SKIP() << "needs a GPU, found none";
    E2eTest::SetUp();
    started_ = true;
  }
  void TearDown() override {
    if (started_) E2eTest::TearDown();
  }
  bool started_ = false;
};

TEST_F(OneVisibleGpuTest, GroupJoinsAndRunsWithOneVisibleGpuPerRank) {
  // World size 4 where every rank can have its own GPU or ranks may share
  // them (MPS); else 2 on two or three GPUs.
  const int n = gpu::DeviceCount();
  auto config = LoadConfigFromEnv(GpuPlatform());
  const bool shared = config.ok() && config->allow_shared_device;
  const int ws = n >= 4 || shared ? 4 : 2;
  // Ranks sharing GPUs under MPS need only one GPU.
  if (n < ws && !shared) {
    GTEST_SKIP() << "needs 2 GPUs, or QR_ALLOW_SHARED_DEVICE=1 under NVIDIA MPS "
                    "(tools/gpu/run_suite.sh); found "
                 << n;
  }
  std::string pcis, matrix;
  for (int i = 0; i < n; ++i) {
    auto id = gpu::PciBusId(i);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    pcis += (i ? "," : "") + *id;
    for (int j = 0; j < n; ++j) {
      if (i == j) {
        matrix += '-';
        continue;
      }
      auto can = gpu::CanAccessPeer(i, j);
      ASSERT_TRUE(can.ok()) << can.status().ToString();
      matrix += *can ? '1' : '0';
    }
  }
  std::printf("GPUs %s, peer access %s\n", pcis.c_str(), matrix.c_str());
  const std::string group = UniqueGroup("onevis");
  // The workers inherit CUDA_DEVICE_ORDER, so CUDA_VISIBLE_DEVICES=i names
  // the GPU that is ordinal i here.
  std::vector<pid_t> pids;
  for (int r = 0; r < ws; ++r) {
    std::vector<std::string> env = {"CUDA_VISIBLE_DEVICES=" + std::to_string(r % n),
                                    "HIP_VISIBLE_DEVICES=" + std::to_string(r % n)};
    pids.push_back(
        SpawnWorker("one_visible", group, r, ws, {{"pcis", pcis}, {"matrix", matrix}}, env));
  }
  const std::vector<int> codes = WaitAll(pids, std::chrono::seconds(240));
  for (int r = 0; r < ws; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv, {{"one_visible", &qr::testing::OneVisibleWorker}});
}
