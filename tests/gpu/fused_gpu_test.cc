// The fused all-reduce + residual add + RMSNorm on GPUs, ranks driven from
// one process (LocalGroup, the GPU backend's launcher): world sizes 2, 4 and
// 8 with ranks sharing the GPUs there are (all on GPU 0 with one; grids
// capped as for QR_ALLOW_SHARED_DEVICE), one-shot and two-shot, fp16 / bf16
// / bf16 with the cast, FP and INT4, token counts 1 .. 257 and hidden sizes
// below, at and above the 256 lanes x 8, with and without a residual, in
// place (residual_out = residual, norm_out = in) and not. Every rank's
// residual_out and norm_out must equal the host reference
// (kernels/rmsnorm_reference.h) bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/geometry.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/rmsnorm_epilogue.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/rmsnorm_reference.h"
#include "tests/gpu/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::FirstDifference;

int TestGpus() { return std::min(gpu::DeviceCount(), 2); }

// One device allocation per buffer of every rank, freed on its device. Kept
// in a deque: growing it never copies an element (a copy would free twice).
struct DeviceVec {
  DeviceVec() = default;
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  int device = 0;
  void* p = nullptr;
  ~DeviceVec() {
    if (p == nullptr) return;
    (void)gpu::SetDevice(device);
    gpu::Free(p);
  }
};

std::vector<uint16_t> Download(const void* p, size_t n) {
  std::vector<uint16_t> v(n);
  EXPECT_OK(gpu::Memcpy(v.data(), p, n * 2));
  return v;
}

class FusedGpuTest : public ::testing::TestWithParam<std::tuple<int, WorkFormat>> {
 protected:
  void SetUp() override {
    if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
    auto g = LocalGroup::Create(std::get<0>(GetParam()), /*max_blocks=*/0, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
  }

  void* Alloc(int rank, size_t bytes, std::deque<DeviceVec>* keep) {
    EXPECT_OK(gpu::SetDevice(group_->device(rank)));
    auto m = gpu::Malloc(bytes);
    EXPECT_OK(m.status());
    keep->emplace_back();
    keep->back().device = group_->device(rank);
    keep->back().p = m.ok() ? *m : nullptr;
    if (m.ok()) EXPECT_OK(gpu::Memset(*m, 0xA5, bytes));  // poison
    return m.ok() ? *m : nullptr;
  }

  // layout: 0 separate outputs, 1 in place (residual_out = residual,
  // norm_out = in), 2 no residual.
  void RunAndCheck(Codec codec, bool one_shot, size_t tokens, size_t hidden, int layout,
                   uint64_t seed) {
    const auto [ws, format] = GetParam();
    const DType dtype = WorkFormatDType(format);
    const size_t n = tokens * hidden;
    SCOPED_TRACE(std::string(one_shot ? "one-shot " : "two-shot ") + CodecName(codec) + " " +
                 WorkFormatName(format) + " " + std::to_string(tokens) + "x" +
                 std::to_string(hidden) + " layout " + std::to_string(layout));
    std::vector<std::vector<uint16_t>> in(ws);
    for (int r = 0; r < ws; ++r) in[r] = testing::MakeInput(dtype, n, seed * 31 + r, false);
    const std::vector<uint16_t> residual = testing::MakeInput(dtype, n, seed * 31 + 97, false);
    const std::vector<uint16_t> weight = testing::MakeInput(dtype, hidden, seed * 31 + 98, false);
    const float eps = 1e-6f;
    std::deque<DeviceVec> keep;
    std::vector<void*> d_in(ws), d_res(ws), d_ro(ws), d_no(ws);
    const LocalCall call{format, codec, n, 10000, one_shot};
    for (int r = 0; r < ws; ++r) {
      d_in[r] = Alloc(r, n * 2, &keep);
      d_res[r] = Alloc(r, n * 2, &keep);
      void* d_w = Alloc(r, hidden * 2, &keep);
      ASSERT_TRUE(d_in[r] && d_res[r] && d_w);
      ASSERT_OK(gpu::Memcpy(d_in[r], in[r].data(), n * 2));
      ASSERT_OK(gpu::Memcpy(d_res[r], residual.data(), n * 2));
      ASSERT_OK(gpu::Memcpy(d_w, weight.data(), hidden * 2));
      d_ro[r] = layout == 1 ? d_res[r] : Alloc(r, n * 2, &keep);
      d_no[r] = layout == 1 ? d_in[r] : Alloc(r, n * 2, &keep);
      const ResidualRmsNormRequest norm{
          dtype, layout == 2 ? nullptr : d_res[r], d_w, d_ro[r], d_no[r], tokens, hidden, eps};
      ASSERT_OK(group_->LaunchResidualRmsNorm(r, call, d_in[r], norm));
    }
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);

    std::vector<std::vector<uint16_t>> want_ro(ws, std::vector<uint16_t>(n)),
        want_no(ws, std::vector<uint16_t>(n));
    std::vector<const uint16_t*> ins, res;
    std::vector<uint16_t*> ros, nos;
    for (int r = 0; r < ws; ++r) {
      ins.push_back(in[r].data());
      res.push_back(layout == 2 ? nullptr : residual.data());
      ros.push_back(want_ro[r].data());
      nos.push_back(want_no[r].data());
    }
    ASSERT_OK(ReferenceAllReduceResidualRmsNorm(
        testing::ReferenceParams(format, codec, ws, n),
        one_shot ? Algorithm::kOneShot : Algorithm::kTwoShot, static_cast<int64_t>(tokens),
        static_cast<int64_t>(hidden), eps, ins.data(), res.data(), weight.data(), ros.data(),
        nos.data()));
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      EXPECT_EQ(FirstDifference(Download(d_ro[r], n), want_ro[r]), "") << "residual_out rank " << r;
      EXPECT_EQ(FirstDifference(Download(d_no[r], n), want_no[r]), "") << "norm_out rank " << r;
    }
  }

  std::unique_ptr<LocalGroup> group_;
};

TEST_P(FusedGpuTest, EqualsTheHostReference) {
  const int ws = std::get<0>(GetParam());
  const size_t one_shot_max = static_cast<size_t>(OneShotMaxElems(ws));
  const size_t shapes[][2] = {{1, 8},     {1, 4096}, {3, 1032}, {7, 2048},  {16, 2056},
                              {64, 4096}, {257, 8},  {5, 8192}, {256, 8192}};
  uint64_t seed = 1;
  for (const auto& shape : shapes) {
    const size_t n = shape[0] * shape[1];
    for (int layout = 0; layout < 3; ++layout) {
      if (n <= one_shot_max) {
        RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], layout, seed++);
        if (HasFatalFailure()) return;
      }
      RunAndCheck(layout == 1 ? Codec::kInt4 : Codec::kFp, /*one_shot=*/false, shape[0], shape[1],
                  layout, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, FusedGpuTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                                              WorkFormat::kBf16Cast)),
                         [](const ::testing::TestParamInfo<std::tuple<int, WorkFormat>>& info) {
                           return "ws" + std::to_string(std::get<0>(info.param)) + "_" +
                                  WorkFormatName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace qr::kernels
