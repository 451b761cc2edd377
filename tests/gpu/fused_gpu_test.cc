// The fused all-reduce + residual add + RMSNorm on GPUs, ranks driven from
// one process (LocalGroup, the GPU backend's launcher): world sizes 2, 4 and
// 8 with ranks sharing the GPUs there are (all on GPU 0 with one; grids
// capped as for QR_ALLOW_SHARED_DEVICE), one-shot and two-shot, fp16 / bf16
// / bf16 with the cast, FP and INT4, token counts 1 .. 257 and hidden sizes
// below, at and above the 256 lanes x 8, with and without a residual, in
// place (residual_out = residual, norm_out = in) and not; one-shot requests
// as one kernel (kernels/gpu/one_shot_fused.cu) where their rows fit and as
// the all-reduce plus the epilogue kernel, and fused calls interleaved with
// plain one-shot all-reduces and one-shot reduce-scatters / all-gathers
// (they share the one-shot region and its per-area counts); two-shot
// requests in the row-split form (kernels/fused_split.h: reduce-scatter by
// rows, the phase-2 round trip for INT codecs, the epilogue on each rank's
// rows, all-gathers) where their rows split exactly, FP and every INT codec,
// tokens that split and that do not, residual_out = in as well, and as the
// all-reduce plus the epilogue; and some of each with programmatic dependent
// launch.
// Every rank's residual_out and norm_out must equal the
// host reference (kernels/rmsnorm_reference.h) bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/all_gather_reference.h"
#include "kernels/fused_split.h"
#include "kernels/geometry.h"
#include "kernels/gpu/collective_request.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/rmsnorm_epilogue.h"
#include "kernels/one_shot_reference.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "kernels/reduce_scatter_reference.h"
#include "kernels/rmsnorm_reference.h"
#include "tests/gpu/local_group_test_util.h"
#include "tests/gpu/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::FirstDifference;

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
    return AllocFilled(group_->device(rank), bytes, 0xA5, keep);  // poison
  }

  // layout: 0 separate outputs, 1 in place (residual_out = residual,
  // norm_out = in), 2 no residual, 3 residual_out = in.
  // one_launch, always: ResidualRmsNormRequest::one_launch and
  // one_launch_always; a one-shot call that the policy (or, always, the
  // kernel) takes must then run as one kernel (checked). split_rows: the
  // same for the row-split form of two-shot calls whose rows split exactly.
  // form: the one-launch kernel's thread layout (ResidualRmsNormRequest).
  // fp8_scale: non-zero asks for the FP8 output with that scale (checked
  // byte for byte too).
  void RunAndCheck(Codec codec, bool one_shot, size_t tokens, size_t hidden, int layout,
                   uint64_t seed, bool one_launch = true, bool split_rows = true,
                   bool always = false, FusedRowForm form = FusedRowForm::kPolicy,
                   float fp8_scale = 0) {
    const auto [ws, format] = GetParam();
    const DType dtype = WorkFormatDType(format);
    const size_t n = tokens * hidden;
    SCOPED_TRACE(std::string(one_shot ? "one-shot " : "two-shot ") + CodecName(codec) + " " +
                 WorkFormatName(format) + " " + std::to_string(tokens) + "x" +
                 std::to_string(hidden) + " layout " + std::to_string(layout) +
                 (one_launch ? "" : " two launches") + (split_rows ? "" : " no split") +
                 (always ? " one launch always" : "") + " form " + FusedRowFormName(form) +
                 (fp8_scale != 0 ? " fp8 scale " + std::to_string(fp8_scale) : ""));
    const bool fp8 = fp8_scale != 0;
    std::vector<std::vector<uint16_t>> in(ws);
    for (int r = 0; r < ws; ++r) in[r] = testing::MakeInput(dtype, n, seed * 31 + r, false);
    const std::vector<uint16_t> residual = testing::MakeInput(dtype, n, seed * 31 + 97, false);
    const std::vector<uint16_t> weight = testing::MakeInput(dtype, hidden, seed * 31 + 98, false);
    const float eps = 1e-6f;
    std::deque<DeviceVec> keep;
    std::vector<void*> d_in(ws), d_res(ws), d_w(ws), d_ro(ws), d_no(ws), d_q(ws), d_scale(ws);
    const LocalCall call{format, codec, n, 10000, one_shot};
    // Every rank's buffers first, then every rank's launch back to back, as
    // LocalGroup::LaunchAll does: a launched rank's kernel waits for the
    // ranks not launched yet, and an allocation, memset or copy in between
    // may wait for that kernel (CUDA lists them among the operations that
    // synchronize implicitly), which then gives up.
    for (int r = 0; r < ws; ++r) {
      d_in[r] = Alloc(r, n * 2, &keep);
      d_res[r] = Alloc(r, n * 2, &keep);
      d_w[r] = Alloc(r, hidden * 2, &keep);
      ASSERT_TRUE(d_in[r] && d_res[r] && d_w[r]);
      ASSERT_OK(gpu::Memcpy(d_in[r], in[r].data(), n * 2));
      ASSERT_OK(gpu::Memcpy(d_res[r], residual.data(), n * 2));
      ASSERT_OK(gpu::Memcpy(d_w[r], weight.data(), hidden * 2));
      d_ro[r] = layout == 1 ? d_res[r] : layout == 3 ? d_in[r] : Alloc(r, n * 2, &keep);
      d_no[r] = layout == 1 ? d_in[r] : Alloc(r, n * 2, &keep);
      if (fp8) {
        d_q[r] = Alloc(r, n, &keep);
        d_scale[r] = Alloc(r, 16, &keep);
        ASSERT_TRUE(d_q[r] && d_scale[r]);
        ASSERT_OK(gpu::Memcpy(d_scale[r], &fp8_scale, sizeof(float)));
      }
    }
    for (int r = 0; r < ws; ++r) {
      ResidualRmsNormRequest norm{dtype,      layout == 2 ? nullptr : d_res[r],
                                  d_w[r],     d_ro[r],
                                  d_no[r],    tokens,
                                  hidden,     eps,
                                  d_q[r],     static_cast<const float*>(d_scale[r]),
                                  one_launch, split_rows,
                                  always};
      norm.form = form;
      if (r == 0) {
        ASSERT_OK_AND_ASSIGN(const bool fused, group_->FusedOneLaunch(call, norm));
        if (one_launch && one_shot) ++one_launch_calls_;
        if (fused != (one_launch && one_shot && FitsOneLaunch(tokens, hidden, always, form))) {
          FAIL() << "one launch chosen: " << fused;
        }
        ASSERT_OK_AND_ASSIGN(const bool split, group_->FusedSplitRows(call, norm));
        const bool exact = SplitRowsExact(format, codec, static_cast<int64_t>(tokens),
                                          static_cast<int64_t>(hidden), ws);
        // The row-split form writes no FP8 output: such calls run two launches.
        if (split != (split_rows && !one_shot && exact && !fp8)) {
          FAIL() << "row split chosen: " << split;
        }
        if (split) ++split_calls_;
      }
      ASSERT_OK(group_->LaunchResidualRmsNorm(r, call, d_in[r], norm));
    }
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);

    std::vector<std::vector<uint16_t>> want_ro(ws, std::vector<uint16_t>(n)),
        want_no(ws, std::vector<uint16_t>(n));
    std::vector<std::vector<uint8_t>> want_q(ws, std::vector<uint8_t>(n));
    std::vector<const uint16_t*> ins, res;
    std::vector<uint16_t*> ros, nos;
    std::vector<uint8_t*> qs;
    for (int r = 0; r < ws; ++r) {
      ins.push_back(in[r].data());
      res.push_back(layout == 2 ? nullptr : residual.data());
      ros.push_back(want_ro[r].data());
      nos.push_back(want_no[r].data());
      qs.push_back(want_q[r].data());
    }
    ASSERT_OK(ReferenceAllReduceResidualRmsNorm(
        testing::ReferenceParams(format, codec, ws, n),
        one_shot ? Algorithm::kOneShot : Algorithm::kTwoShot, static_cast<int64_t>(tokens),
        static_cast<int64_t>(hidden), eps, ins.data(), res.data(), weight.data(), ros.data(),
        nos.data(), fp8 ? qs.data() : nullptr, fp8_scale));
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      EXPECT_EQ(FirstDifference(Download(d_ro[r], n), want_ro[r]), "") << "residual_out rank " << r;
      EXPECT_EQ(FirstDifference(Download(d_no[r], n), want_no[r]), "") << "norm_out rank " << r;
      if (fp8) {
        const std::vector<uint16_t> got = Download(d_q[r], n / 2);  // n bytes
        const auto* bytes = reinterpret_cast<const uint8_t*>(got.data());
        size_t i = 0;
        while (i < n && bytes[i] == want_q[r][i]) ++i;
        EXPECT_EQ(i, n) << "quant_out rank " << r << " byte " << i << ": "
                        << static_cast<int>(bytes[i]) << " want " << static_cast<int>(want_q[r][i]);
      }
    }
  }

  // The one-launch rule (kernels/gpu/one_shot_fused_slots.h) for this
  // group: the policy's, or (always) whether the kernel fits.
  bool FitsOneLaunch(size_t tokens, size_t hidden, bool always, FusedRowForm form) const {
    const auto t = static_cast<int64_t>(tokens);
    const auto h = static_cast<int64_t>(hidden);
    const FusedLaunchShape shape = FusedShapeOf(t, h, group_->max_blocks(), group_->world_size(),
                                                608, form, GpuBlockClusters());
    return always ? FusedOneLaunchFits(shape.slots) : FusedOneLaunchPays(shape, t);
  }

  // A plain one-shot all-reduce of `count` elements on every rank, checked.
  void RunPlainOneShot(size_t count, uint64_t seed) {
    const auto [ws, format] = GetParam();
    SCOPED_TRACE("plain one-shot " + std::to_string(count));
    std::deque<DeviceVec> keep;
    std::vector<std::vector<uint16_t>> in(ws), want(ws, std::vector<uint16_t>(count));
    std::vector<const void*> d_in(ws);
    std::vector<void*> d_out(ws);
    for (int r = 0; r < ws; ++r) {
      in[r] = testing::MakeInput(WorkFormatDType(format), count, seed * 131 + r, false);
      void* a = Alloc(r, count * 2, &keep);
      d_out[r] = Alloc(r, count * 2, &keep);
      ASSERT_TRUE(a && d_out[r]);
      ASSERT_OK(gpu::Memcpy(a, in[r].data(), count * 2));
      d_in[r] = a;
    }
    ASSERT_OK(group_->LaunchAll({format, Codec::kFp, count, 10000, true}, d_in, d_out));
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);
    std::vector<const uint16_t*> ins;
    std::vector<uint16_t*> outs;
    for (int r = 0; r < ws; ++r) {
      ins.push_back(in[r].data());
      outs.push_back(want[r].data());
    }
    ASSERT_OK(ReferenceOneShotAllReduce(testing::ReferenceParams(format, Codec::kFp, ws, count),
                                        ins.data(), outs.data()));
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      EXPECT_EQ(FirstDifference(Download(d_out[r], count), want[r]), "") << "rank " << r;
    }
  }

  // A one-shot reduce-scatter or all-gather of `count` per rank
  // (kernels/gpu/one_shot_collectives.cu, the same region and counts).
  void RunOneShotCollective(Collective kind, size_t count, uint64_t seed) {
    const auto [ws, format] = GetParam();
    SCOPED_TRACE("one-shot collective " + std::to_string(static_cast<int>(kind)) + " " +
                 std::to_string(count));
    ASSERT_TRUE(CollectiveRunsOneShot(kind, Algorithm::kOneShot, static_cast<int64_t>(count), ws));
    const bool rs = kind == Collective::kReduceScatter;
    const size_t in_n = rs ? ws * count : count;
    const size_t out_n = rs ? count : ws * count;
    std::deque<DeviceVec> keep;
    std::vector<std::vector<uint16_t>> in(ws), want(ws, std::vector<uint16_t>(out_n));
    std::vector<const void*> d_in(ws);
    std::vector<void*> d_out(ws);
    for (int r = 0; r < ws; ++r) {
      in[r] = testing::MakeInput(WorkFormatDType(format), in_n, seed * 131 + r, true);
      void* a = Alloc(r, in_n * 2, &keep);
      d_out[r] = Alloc(r, out_n * 2, &keep);
      ASSERT_TRUE(a && d_out[r]);
      ASSERT_OK(gpu::Memcpy(a, in[r].data(), in_n * 2));
      d_in[r] = a;
    }
    LocalCall call{format, Codec::kInt8, count, 10000, /*one_shot=*/true};
    call.collective = kind;
    ASSERT_OK(group_->LaunchAll(call, d_in, d_out));
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);
    std::vector<const uint16_t*> ins;
    std::vector<uint16_t*> outs;
    for (int r = 0; r < ws; ++r) {
      ins.push_back(in[r].data());
      outs.push_back(want[r].data());
    }
    const TwoShotParams p = testing::ReferenceParams(format, Codec::kInt8, ws, count);
    ASSERT_OK(rs ? ReferenceReduceScatter(ReduceScatterParamsFor(p, Algorithm::kOneShot),
                                          ins.data(), outs.data())
                 : ReferenceAllGather(AllGatherParamsFor(p, Algorithm::kOneShot), ins.data(),
                                      outs.data()));
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      EXPECT_EQ(FirstDifference(Download(d_out[r], out_n), want[r]), "") << "rank " << r;
    }
  }

  std::unique_ptr<LocalGroup> group_;
  int one_launch_calls_ = 0;
  int split_calls_ = 0;
};

TEST_P(FusedGpuTest, EqualsTheHostReference) {
  const int ws = std::get<0>(GetParam());
  const size_t one_shot_max = static_cast<size_t>(OneShotMaxElems(ws));
  // Rows split over parts (4096 and up, one_shot_fused_slots.h FusedShapeOf:
  // 2, 4, 8 parts, 4 parts of 192 threads at 6144, and where clusters exist
  // 4096 in 4 parts of 128 at 1 x 4096 and 16 x 4096 at ws 2, 2 parts of 256
  // at 16 x 4096 at ws 4: FusedClusterParts), rows of one part,
  // and rows of 16384 on two parts of 1024 threads walking several rows
  // (40 x 16384). Layouts 1 and 2 force the lane-threads form (2 chunks a
  // thread at 2056-4096, 4 at 5120-8192, the last chunks of 2056 and 5120
  // past the row on some threads; blocks walking several rows at 130 x
  // 4096) and the one-thread-a-chunk form.
  const size_t shapes[][2] = {{1, 8},      {1, 4096},   {3, 1032}, {7, 2048},   {16, 2056},
                              {64, 4096},  {257, 8},    {5, 8192}, {3, 6144},   {1, 16384},
                              {40, 16384}, {256, 8192}, {3, 5120}, {130, 4096}, {16, 4096}};
  uint64_t seed = 1;
  for (const auto& shape : shapes) {
    const size_t n = shape[0] * shape[1];
    for (int layout = 0; layout < 3; ++layout) {
      if (n <= one_shot_max) {
        // Layout 0 as the policy runs it; the others as one launch wherever
        // the kernel fits (blocks that walk several rows included).
        RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], layout, seed++,
                    /*one_launch=*/true, /*split_rows=*/true, /*always=*/layout != 0,
                    layout == 1   ? FusedRowForm::kLaneThreads
                    : layout == 2 ? FusedRowForm::kChunkThreads
                                  : FusedRowForm::kPolicy);
        if (HasFatalFailure()) return;
        if (layout == 0) {
          RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], layout, seed++,
                      /*one_launch=*/false);
          if (HasFatalFailure()) return;
        }
      }
      RunAndCheck(layout == 1 ? Codec::kInt4 : Codec::kFp, /*one_shot=*/false, shape[0], shape[1],
                  layout, seed++);
      if (HasFatalFailure()) return;
      if (layout == 0) {  // two-shot as the all-reduce and the epilogue on every row
        RunAndCheck(Codec::kFp, /*one_shot=*/false, shape[0], shape[1], layout, seed++,
                    /*one_launch=*/true, /*split_rows=*/false);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The FP8 output against the host reference, byte for byte, in every form
// that writes it: one launch (rows of one part, parts of a row as a
// cluster, two chunks a thread, blocks walking several rows) and the two
// launches after one-shot and after two-shot (the row-split form takes no
// FP8 request: asked for, it runs two launches), in every buffer layout;
// scales that saturate (1/512) and that reach e4m3's subnormals (8).
TEST_P(FusedGpuTest, Fp8OutputEqualsTheHostReference) {
  const int ws = std::get<0>(GetParam());
  const size_t one_shot_max = static_cast<size_t>(OneShotMaxElems(ws));
  const size_t shapes[][2] = {{1, 4096}, {16, 4096}, {5, 8192}, {130, 4096}, {3, 1032}};
  const float scales[] = {0.5f, 1.0f / 512, 8.0f};
  uint64_t seed = 500;
  int index = 0;
  for (const auto& shape : shapes) {
    for (int layout = 0; layout < 4; ++layout, ++index) {
      const float scale = scales[index % 3];
      if (shape[0] * shape[1] <= one_shot_max) {
        RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], layout, seed++,
                    /*one_launch=*/true, /*split_rows=*/true, /*always=*/layout != 0,
                    layout == 1 ? FusedRowForm::kLaneThreads : FusedRowForm::kPolicy, scale);
        if (HasFatalFailure()) return;
        RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], layout, seed++,
                    /*one_launch=*/false, /*split_rows=*/true, false, FusedRowForm::kPolicy, scale);
        if (HasFatalFailure()) return;
      }
      RunAndCheck(layout == 1 ? Codec::kInt8 : Codec::kFp, /*one_shot=*/false, shape[0], shape[1],
                  layout, seed++, /*one_launch=*/true, /*split_rows=*/true, false,
                  FusedRowForm::kPolicy, scale);
      if (HasFatalFailure()) return;
    }
  }
}

// The row-split form against the reference, bit for bit, in every codec
// the world size runs: rows of 1056 (whole 32-value blocks per rank at
// every world size), of 1032 (whole blocks only for a multiple of 4 rows
// per rank), 8 x 8 (a block per rank at world size 2 only), tokens that do
// not split (7, 12 at world size 8: the all-reduce and the epilogue on
// every row), a chunk of several collective tiles (64 x 4096), and every
// buffer layout; then split calls interleaved with the unsplit two-shot,
// plain one-shot all-reduces and one-launch fused calls, which share the
// slots, colours and the one-shot region with them.
TEST_P(FusedGpuTest, RowSplitEqualsTheHostReference) {
  const int ws = std::get<0>(GetParam());
  const size_t shapes[][2] = {{24, 1056}, {24, 1032}, {8, 8}, {7, 4096}, {12, 2048}, {64, 4096}};
  const Codec codecs[] = {Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3};
  uint64_t seed = 3000;
  int index = 0;
  for (const auto& shape : shapes) {
    for (Codec codec : codecs) {
      if (!CodecRunsAtWorldSize(codec, ws)) continue;
      RunAndCheck(codec, /*one_shot=*/false, shape[0], shape[1], index++ % 4, seed++);
      if (HasFatalFailure()) return;
    }
  }
  for (int rep = 0; rep < 2; ++rep) {
    RunAndCheck(Codec::kInt8, /*one_shot=*/false, 16, 4096, 1, seed++);
    if (HasFatalFailure()) return;
    RunAndCheck(Codec::kFp, /*one_shot=*/false, 16, 4096, 3, seed++, true, /*split_rows=*/false);
    if (HasFatalFailure()) return;
    RunPlainOneShot(2048 * 5 + 8, seed++);
    if (HasFatalFailure()) return;
    RunAndCheck(Codec::kFp, /*one_shot=*/true, 4, 4096, 0, seed++);
    if (HasFatalFailure()) return;
  }
  // Every format splits its FP calls (four of them at world size 8); with
  // the bf16 cast the integer codecs keep the unsplit form
  // (kernels/fused_split.h), so only those count there. Which form each call
  // took is checked call by call above.
  EXPECT_GE(split_calls_, std::get<1>(GetParam()) == WorkFormat::kBf16Cast ? 4 : 6);
}

// Fused one-launch calls and plain one-shot all-reduces in turn, of sizes
// that put their atoms on different blocks: they share the one-shot region,
// whose slots must be empty and whose per-area counts in step at every call
// (one_shot_fused_slots.h), so a mistake hangs or corrupts a later call.
TEST_P(FusedGpuTest, SharesTheOneShotRegionWithThePlainKernel) {
  const size_t one_shot_max = static_cast<size_t>(OneShotMaxElems(group_->world_size()));
  const size_t fused[][2] = {{1, 4096}, {33, 2056}, {2, 8192}, {150, 1032}, {64, 4096}};
  const size_t plain[] = {8, 2048 * 5 + 8, 100000, one_shot_max / 2, 2056};
  // Whole messages of the one-shot reduce-scatters / all-gathers in between.
  const size_t collective[] = {64, 2048 * 9, one_shot_max, 4096, 100000};
  uint64_t seed = 1000;
  for (int rep = 0; rep < 2; ++rep) {
    for (size_t i = 0; i < 5; ++i) {
      if (fused[i][0] * fused[i][1] <= one_shot_max) {
        RunAndCheck(Codec::kFp, /*one_shot=*/true, fused[i][0], fused[i][1], i % 3, seed++,
                    /*one_launch=*/true, /*split_rows=*/true, /*always=*/true);
        if (HasFatalFailure()) return;
      }
      RunPlainOneShot(plain[i], seed++);
      if (HasFatalFailure()) return;
      // The one-shot reduce-scatter and all-gather share the region too.
      const size_t per_rank = collective[i] / static_cast<size_t>(group_->world_size()) / 8 * 8;
      RunOneShotCollective(i % 2 == 0 ? Collective::kReduceScatter : Collective::kAllGather,
                           per_rank, seed++);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(one_launch_calls_, 0);
}

// Every kernel launched with programmatic overlap of the previous one
// (kernels/platform/launch.cuh; plain launches where the GPU lacks it):
// the same bits, one launch and two, one-shot and two-shot, and plain
// one-shot calls in between.
TEST_P(FusedGpuTest, ProgrammaticLaunchKeepsTheBits) {
  group_->SetProgrammaticLaunch(1);
  const size_t one_shot_max = static_cast<size_t>(OneShotMaxElems(group_->world_size()));
  const size_t shapes[][2] = {{1, 4096}, {16, 2056}, {64, 4096}};
  uint64_t seed = 2000;
  for (const auto& shape : shapes) {
    if (shape[0] * shape[1] <= one_shot_max) {
      RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], 0, seed++);
      if (HasFatalFailure()) return;
      RunAndCheck(Codec::kFp, /*one_shot=*/true, shape[0], shape[1], 1, seed++,
                  /*one_launch=*/false);
      if (HasFatalFailure()) return;
      RunPlainOneShot(shape[0] * shape[1], seed++);
      if (HasFatalFailure()) return;
    }
    RunAndCheck(Codec::kFp, /*one_shot=*/false, shape[0], shape[1], 2, seed++);
    if (HasFatalFailure()) return;
  }
  group_->SetProgrammaticLaunch(0);
}

// Only rank 0 calls, so its blocks wait for a peer that never comes: the
// wait's timeout ends every block of the call, a row's parts included (they
// also wait for each other's lane sums), and later calls drain at once
// (sticky error; in a cluster every block still meets its partners at each
// row's barrier, so a block that returned alone would hang this). Rows of
// one block (1 x 4096; four parts where clusters exist), of four parts (1 x 8192),
// of two parts walking several rows (40 x 16384) and in the lane-threads
// form (3 x 8192, 4 chunks a thread).
class FusedGiveUpTest : public ::testing::TestWithParam<std::tuple<size_t, size_t, FusedRowForm>> {
};

TEST_P(FusedGiveUpTest, WaitTimesOutAndLaterCallsDrain) {
  if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
  const auto [tokens, hidden, form] = GetParam();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalGroup> group,
                       LocalGroup::Create(2, /*max_blocks=*/0, TestGpus()));
  ASSERT_OK(gpu::SetDevice(group->device(0)));
  const size_t n = tokens * hidden;
  std::deque<DeviceVec> keep;
  auto alloc = [&](size_t bytes) { return AllocFilled(group->device(0), bytes, 0x3C, &keep); };
  void* in = alloc(n * 2);
  void* residual = alloc(n * 2);
  void* weight = alloc(hidden * 2);
  void* residual_out = alloc(n * 2);
  void* norm_out = alloc(n * 2);
  ASSERT_TRUE(in && residual && weight && residual_out && norm_out);
  const LocalCall call{WorkFormat::kBf16, Codec::kFp, n, /*timeout_ms=*/50, /*one_shot=*/true};
  ResidualRmsNormRequest norm;
  norm.dtype = DType::kBFloat16;
  norm.residual = residual;
  norm.weight = weight;
  norm.residual_out = residual_out;
  norm.norm_out = norm_out;
  norm.tokens = tokens;
  norm.hidden = hidden;
  norm.eps = 1e-6f;
  norm.one_launch_always = true;
  norm.form = form;
  ASSERT_OK_AND_ASSIGN(const bool one, group->FusedOneLaunch(call, norm));
  ASSERT_TRUE(one) << "the one-launch kernel must take the call";
  ASSERT_OK(group->LaunchResidualRmsNorm(0, call, in, norm));
  EXPECT_LT(DrainSeconds(*group, 0, 5.0), 2.0);
  EXPECT_EQ(group->error(0), kGpuErrorTimeout);
  for (int i = 0; i < 10; ++i) ASSERT_OK(group->LaunchResidualRmsNorm(0, call, in, norm));
  EXPECT_LT(DrainSeconds(*group, 0, 5.0), 0.5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedGiveUpTest,
    ::testing::Values(std::make_tuple(size_t{1}, size_t{4096}, FusedRowForm::kChunkThreads),
                      std::make_tuple(size_t{1}, size_t{8192}, FusedRowForm::kChunkThreads),
                      std::make_tuple(size_t{40}, size_t{16384}, FusedRowForm::kChunkThreads),
                      std::make_tuple(size_t{3}, size_t{8192}, FusedRowForm::kLaneThreads)),
    [](const ::testing::TestParamInfo<std::tuple<size_t, size_t, FusedRowForm>>& info) {
      return std::to_string(std::get<0>(info.param)) + "x" +
             std::to_string(std::get<1>(info.param)) +
             (std::get<2>(info.param) == FusedRowForm::kLaneThreads ? "Lanes" : "");
    });

INSTANTIATE_TEST_SUITE_P(WorldSizes, FusedGpuTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                                              WorkFormat::kBf16Cast)),
                         WorldSizeAndFormatName);

}  // namespace
}  // namespace qr::kernels
