// Two GPUs driven from one process (peer access, no broker): the two-shot and
// one-shot kernels against the host references bit for bit, graph replay,
// the alternating-shape hang regression, and abort/timeout giving up; and the
// world-size-4 and -8 kernels bit for bit with their ranks sharing the two
// GPUs (their logic only). On a machine with one GPU every case runs with all
// its ranks on GPU 0 (grids capped as for QR_ALLOW_SHARED_DEVICE).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/gpu/local_group.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/one_shot_reference.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/two_shot_reference.h"
#include "tests/gpu/local_group_test_util.h"
#include "tests/gpu/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::FirstDifference;

constexpr int kWs = 2;

// GPUs the groups spread their ranks over: 2, or 1 where that is all there
// is (every rank on GPU 0). 0: none, the test skips.
int TestGpus() { return std::min(gpu::DeviceCount(), 2); }

// Device in/out buffers for every rank of a group, sized for `count` elements.
struct RankBuffers {
  std::vector<void*> in, out;
  std::vector<int> devices;
  size_t bytes = 0;
  ~RankBuffers() {
    for (size_t r = 0; r < in.size(); ++r) {
      (void)gpu::SetDevice(devices[r]);
      gpu::Free(in[r]);
      gpu::Free(out[r]);
    }
  }
};

std::unique_ptr<RankBuffers> Alloc(const LocalGroup& g, size_t count) {
  auto b = std::make_unique<RankBuffers>();
  b->bytes = count * 2;
  const int ws = g.world_size();
  b->in.assign(ws, nullptr);
  b->out.assign(ws, nullptr);
  for (int r = 0; r < ws; ++r) b->devices.push_back(g.device(r));
  for (int r = 0; r < ws; ++r) {
    EXPECT_OK(gpu::SetDevice(g.device(r)));
    auto in = gpu::Malloc(b->bytes + 16);
    auto out = gpu::Malloc(b->bytes + 16);
    EXPECT_OK(in.status());
    EXPECT_OK(out.status());
    if (!in.ok() || !out.ok()) return nullptr;
    b->in[r] = *in;
    b->out[r] = *out;
  }
  return b;
}

Status Reference(bool one_shot, const TwoShotParams& p, const uint16_t* const* in,
                 uint16_t* const* out) {
  return one_shot ? ReferenceOneShotAllReduce(p, in, out) : ReferenceAllReduce(p, in, out);
}

class TwoShotLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
    auto g = LocalGroup::Create(kWs, /*max_blocks=*/0, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
  }

  // Runs one all-reduce of host inputs and checks both ranks against the
  // reference, bit for bit; in_place uses the input buffer as output.
  void RunAndCheck(WorkFormat elem, Codec codec, size_t count,
                   const std::vector<std::vector<uint16_t>>& inputs, bool in_place = false,
                   bool one_shot = false) {
    SCOPED_TRACE(std::string(one_shot ? "one-shot " : "") + CodecName(codec) + " " +
                 WorkFormatName(elem) + " count=" + std::to_string(count) +
                 (in_place ? " in-place" : ""));
    const int ws = group_->world_size();
    auto buf = Alloc(*group_, count);
    ASSERT_NE(buf, nullptr);
    std::vector<const void*> ins;
    std::vector<void*> outs;
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      ASSERT_OK(gpu::Memset(buf->in[r], 0xA5, count * 2 + 16));  // poison
      ASSERT_OK(gpu::Memset(buf->out[r], 0xA5, count * 2 + 16));
      ASSERT_OK(gpu::Memcpy(buf->in[r], inputs[r].data(), count * 2));
      ins.push_back(buf->in[r]);
      outs.push_back(in_place ? buf->in[r] : buf->out[r]);
    }
    LocalCall call{elem, codec, count, 10000, one_shot};
    ASSERT_OK(group_->LaunchAll(call, ins, outs));
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);

    std::vector<std::vector<uint16_t>> want(ws, std::vector<uint16_t>(count));
    std::vector<const uint16_t*> in_ptrs;
    std::vector<uint16_t*> want_ptrs;
    for (int r = 0; r < ws; ++r) {
      in_ptrs.push_back(inputs[r].data());
      want_ptrs.push_back(want[r].data());
    }
    ASSERT_OK(Reference(one_shot, testing::ReferenceParams(elem, codec, ws, count), in_ptrs.data(),
                        want_ptrs.data()));
    std::vector<uint16_t> first;
    for (int r = 0; r < ws; ++r) {
      std::vector<uint16_t> got(count + 8);
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      ASSERT_OK(gpu::Memcpy(got.data(), outs[r], count * 2 + 16));
      // Nothing written past the end.
      for (int i = 0; i < 8; ++i) ASSERT_EQ(got[count + i], 0xA5A5) << "rank " << r;
      got.resize(count);
      EXPECT_EQ(FirstDifference(got, want[r]), "") << "rank " << r << " vs reference";
      if (r == 0) {
        first = got;
      } else {
        EXPECT_EQ(FirstDifference(got, first), "") << "rank " << r << " vs rank 0";
      }
    }
  }

  std::unique_ptr<LocalGroup> group_;
};

class TwoShotBitExactTest : public TwoShotLocalTest,
                            public ::testing::WithParamInterface<std::tuple<Codec, WorkFormat>> {};

TEST_P(TwoShotBitExactTest, EqualsReferenceAtManySizes) {
  const auto [codec, elem] = GetParam();
  // Elements: tiny, around an atom row (2048), around a tile (16384),
  // partial tiles, more tiles than blocks, and a few MiB.
  const size_t sizes[] = {8,
                          16,
                          24,
                          1024,
                          2040,
                          2048,
                          2056,
                          16376,
                          16384,
                          16392,
                          3 * 16384 + 8,
                          100000,
                          1 << 20,
                          (1 << 22) + 8,
                          9 * 1000 * 1000 + 8};
  uint64_t seed = 1;
  for (size_t count : sizes) {
    std::vector<std::vector<uint16_t>> in;
    for (int r = 0; r < kWs; ++r) {
      in.push_back(testing::MakeInput(WorkFormatDType(elem), count, seed++ * 7919 + count, true));
    }
    RunAndCheck(elem, codec, count, in);
    if (HasFatalFailure()) return;
  }
  // In place.
  std::vector<std::vector<uint16_t>> in;
  for (int r = 0; r < kWs; ++r)
    in.push_back(testing::MakeInput(WorkFormatDType(elem), 50000, 99 + r, false));
  RunAndCheck(elem, codec, 50000, in, /*in_place=*/true);
}

INSTANTIATE_TEST_SUITE_P(AllCodecsAndDtypes, TwoShotBitExactTest,
                         ::testing::Combine(::testing::Values(Codec::kFp, Codec::kInt8,
                                                              Codec::kInt6, Codec::kInt4,
                                                              Codec::kInt3),
                                            ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                                              WorkFormat::kBf16Cast)),
                         [](const ::testing::TestParamInfo<std::tuple<Codec, WorkFormat>>& info) {
                           return std::string(CodecName(std::get<0>(info.param))) + "_" +
                                  WorkFormatName(std::get<1>(info.param));
                         });

class OneShotBitExactTest : public TwoShotLocalTest,
                            public ::testing::WithParamInterface<WorkFormat> {};

// One-shot against its reference (which equals two-shot FP) from one atom to
// the largest call it takes, with NaN/inf, the wire's special patterns
// (0xFFFF, 0xFFFE, zeros) and a codec it must ignore; then in place.
TEST_P(OneShotBitExactTest, EqualsReferenceAtManySizes) {
  const WorkFormat elem = GetParam();
  const size_t max = static_cast<size_t>(OneShotMaxElems(kWs));
  const size_t sizes[] = {8, 16, 2048, 2056, 4096 * 8, 100000, max - 8, max};
  uint64_t seed = 3;
  for (size_t count : sizes) {
    std::vector<std::vector<uint16_t>> in;
    for (int r = 0; r < kWs; ++r) {
      in.push_back(testing::MakeInput(WorkFormatDType(elem), count, seed++ * 131 + count, true));
      for (size_t i = r; i < count; i += 37)
        in[r][i] = (i / 37) % 3 == 0 ? 0xFFFF : (i / 37) % 3 == 1 ? 0xFFFE : 0;
    }
    RunAndCheck(elem, seed % 2 ? Codec::kInt4 : Codec::kFp, count, in, false, true);
    if (HasFatalFailure()) return;
  }
  std::vector<std::vector<uint16_t>> in;
  for (int r = 0; r < kWs; ++r)
    in.push_back(testing::MakeInput(WorkFormatDType(elem), 50000, 7 + r, false));
  RunAndCheck(elem, Codec::kFp, 50000, in, /*in_place=*/true, /*one_shot=*/true);
}

// World sizes 4 and 8 with two or four ranks per GPU (LocalGroup's `gpus`;
// four or eight on one GPU):
// both algorithms against the references at sizes around atom rows, tiles
// and the one-shot limit, and in place.
class SharedGpuBitExactTest
    : public TwoShotLocalTest,
      public ::testing::WithParamInterface<std::tuple<int, Codec, WorkFormat>> {
 protected:
  void SetUp() override {
    if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
    auto g = LocalGroup::Create(std::get<0>(GetParam()), /*max_blocks=*/0, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
  }
};

TEST_P(SharedGpuBitExactTest, EqualsReferenceAtManySizes) {
  const auto [ws, codec, elem] = GetParam();
  const size_t one_shot_max = static_cast<size_t>(OneShotMaxElems(ws));
  const size_t sizes[] = {8, 2056, 16392, 3 * 16384 + 8, 100000, one_shot_max, 2500000};
  uint64_t seed = 5;
  for (size_t count : sizes) {
    std::vector<std::vector<uint16_t>> in;
    for (int r = 0; r < ws; ++r) {
      in.push_back(testing::MakeInput(WorkFormatDType(elem), count, seed++ * 7919 + count, true));
    }
    RunAndCheck(elem, codec, count, in);
    if (HasFatalFailure()) return;
    if (count <= one_shot_max) {
      RunAndCheck(elem, codec, count, in, /*in_place=*/false, /*one_shot=*/true);
      if (HasFatalFailure()) return;
    }
  }
  std::vector<std::vector<uint16_t>> in;
  for (int r = 0; r < ws; ++r) {
    in.push_back(testing::MakeInput(WorkFormatDType(elem), 50000, 11 + r, false));
  }
  RunAndCheck(elem, codec, 50000, in, /*in_place=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes4And8, SharedGpuBitExactTest,
    ::testing::Combine(::testing::Values(4, 8),
                       ::testing::Values(Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4),
                       ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                         WorkFormat::kBf16Cast)),
    [](const ::testing::TestParamInfo<std::tuple<int, Codec, WorkFormat>>& info) {
      return "ws" + std::to_string(std::get<0>(info.param)) + "_" +
             CodecName(std::get<1>(info.param)) + "_" + WorkFormatName(std::get<2>(info.param));
    });

INSTANTIATE_TEST_SUITE_P(AllDtypes, OneShotBitExactTest,
                         ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                           WorkFormat::kBf16Cast),
                         [](const ::testing::TestParamInfo<WorkFormat>& info) {
                           return std::string(WorkFormatName(info.param));
                         });

TEST_F(TwoShotLocalTest, EqualsReferenceAt256MiB) {
  const size_t count = (256u << 20) / 2;
  const std::tuple<Codec, WorkFormat> cases[] = {{Codec::kFp, WorkFormat::kFp16},
                                                 {Codec::kInt4, WorkFormat::kBf16Cast},
                                                 {Codec::kInt8, WorkFormat::kBf16},
                                                 {Codec::kInt3, WorkFormat::kFp16},
                                                 {Codec::kInt6, WorkFormat::kFp16}};
  uint64_t seed = 5;
  for (const auto& [codec, elem] : cases) {
    std::vector<std::vector<uint16_t>> in;
    for (int r = 0; r < kWs; ++r)
      in.push_back(testing::MakeUniformInput(WorkFormatDType(elem), count, seed++));
    RunAndCheck(elem, codec, count, in);
    if (HasFatalFailure()) return;
  }
}

// The group-level tests at world size 2 (one GPU per rank), and at 4 and 8
// with the ranks sharing the 2 GPUs (kernel logic only; see
// SharedGpuBitExactTest); on one GPU all ranks share it.
class GroupTest : public TwoShotLocalTest, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
    auto g = LocalGroup::Create(GetParam(), /*max_blocks=*/0, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
  }
};

INSTANTIATE_TEST_SUITE_P(WorldSizes, GroupTest, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "ws" + std::to_string(info.param);
                         });

// One all-reduce of a captured or eager sequence.
struct Op {
  WorkFormat elem;
  Codec codec;
  size_t count;
  bool one_shot;
};

// Captures `ops` into one graph per rank and replays it `replays` times
// with one of four input sets copied in before each replay, checking every
// op of every replay against the reference bit for bit.
void ReplayAndCheck(LocalGroup& group, const std::vector<Op>& ops, int replays) {
  const int ws = group.world_size();
  constexpr int kSets = 4;
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  // inputs[op][set][rank], want[op][set][rank]
  std::vector<std::vector<std::vector<std::vector<uint16_t>>>> inputs, want;
  uint64_t seed = 11;
  for (const Op& op : ops) {
    bufs.push_back(Alloc(group, op.count));
    ASSERT_NE(bufs.back(), nullptr);
    inputs.emplace_back();
    want.emplace_back();
    for (int s = 0; s < kSets; ++s) {
      std::vector<std::vector<uint16_t>> in, out(ws, std::vector<uint16_t>(op.count));
      std::vector<const uint16_t*> ip;
      std::vector<uint16_t*> op_ptrs;
      for (int r = 0; r < ws; ++r) {
        in.push_back(testing::MakeInput(WorkFormatDType(op.elem), op.count, seed++, false));
      }
      for (int r = 0; r < ws; ++r) {
        ip.push_back(in[r].data());
        op_ptrs.push_back(out[r].data());
      }
      ASSERT_OK(Reference(op.one_shot, testing::ReferenceParams(op.elem, op.codec, ws, op.count),
                          ip.data(), op_ptrs.data()));
      inputs.back().push_back(std::move(in));
      want.back().push_back(std::move(out));
    }
  }
  std::vector<gpu::GraphExec> graphs(ws, nullptr);
  for (int r = 0; r < ws; ++r) {
    ASSERT_OK(gpu::SetDevice(group.device(r)));
    ASSERT_OK(gpu::BeginCapture(group.stream(r)));
    for (size_t i = 0; i < ops.size(); ++i) {
      LocalCall call{ops[i].elem, ops[i].codec, ops[i].count, 10000, ops[i].one_shot};
      ASSERT_OK(group.Launch(r, call, bufs[i]->in[r], bufs[i]->out[r]));
    }
    ASSERT_OK_AND_ASSIGN(graphs[r], gpu::EndCapture(group.stream(r)));
  }
  for (int rep = 0; rep < replays; ++rep) {
    const int set = (rep * 3 + 1) % kSets;
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group.device(r)));
      for (size_t i = 0; i < ops.size(); ++i) {
        ASSERT_OK(gpu::MemcpyAsync(bufs[i]->in[r], inputs[i][set][r].data(), ops[i].count * 2,
                                   group.stream(r)));
      }
      ASSERT_OK(gpu::GraphLaunch(graphs[r], group.stream(r)));
    }
    ASSERT_OK(group.Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group.error(r), kGpuErrorNone) << "replay " << rep;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (int r = 0; r < ws; ++r) {
        std::vector<uint16_t> got(ops[i].count);
        ASSERT_OK(gpu::SetDevice(group.device(r)));
        ASSERT_OK(gpu::Memcpy(got.data(), bufs[i]->out[r], ops[i].count * 2));
        ASSERT_EQ(FirstDifference(got, want[i][set][r]), "")
            << "replay " << rep << " op " << i << " rank " << r;
      }
    }
  }
  for (int r = 0; r < ws; ++r) {
    ASSERT_OK(gpu::SetDevice(group.device(r)));
    gpu::GraphDestroy(graphs[r]);
  }
}

// A graph holding three all-reduces (different sizes and codecs), replayed
// 1000 times with new inputs copied in before each replay.
TEST_P(GroupTest, GraphReplayedThousandTimesStaysCorrect) {
  // Two-shot and one-shot mixed; an odd number of one-shot calls per replay
  // flips the one-shot phase between replays.
  ReplayAndCheck(*group_,
                 {{WorkFormat::kFp16, Codec::kFp, 32768, false},
                  {WorkFormat::kBf16, Codec::kFp, 4096, true},
                  {WorkFormat::kFp16, Codec::kInt4, (1 << 19) + 8, false},
                  {WorkFormat::kFp16, Codec::kFp, 200000, true},
                  {WorkFormat::kBf16Cast, Codec::kInt8, 100000, false},
                  {WorkFormat::kBf16Cast, Codec::kFp, 8, true}},
                 1000);
}

// The data-flag codecs (INT4, INT8) and the flag codecs (FP, INT6, INT3)
// share each block's slots with different geometry; a block that changes
// family or data-flag codec runs the handshake of kernels/gpu/two_shot.h.
// A sequence that changes codec at almost every call, with grids of 1 to
// all blocks (so that blocks skip calls and meet a codec change one or more
// calls later), eagerly and then captured and replayed: every result bit for
// bit the reference's.
std::vector<Op> MixedCodecOps(int ws) {
  const Codec int3_or_int4 = ws == 2 ? Codec::kInt3 : Codec::kInt4;
  return {{WorkFormat::kFp16, Codec::kFp, 100000, false},
          {WorkFormat::kFp16, Codec::kInt4, (1 << 20) + 8, false},
          {WorkFormat::kBf16, Codec::kInt8, 16392, false},
          {WorkFormat::kFp16, Codec::kInt6, 300000, false},
          {WorkFormat::kBf16Cast, Codec::kInt4, 2056, false},
          {WorkFormat::kFp16, Codec::kInt4, 3 * 16384 + 8, false},
          {WorkFormat::kBf16, Codec::kFp, 8, false},
          {WorkFormat::kFp16, Codec::kInt8, 1 << 21, false},
          {WorkFormat::kFp16, Codec::kFp, 4096, true},
          {WorkFormat::kBf16Cast, Codec::kInt8, 200008, false},
          {WorkFormat::kFp16, int3_or_int4, 500000, false},
          {WorkFormat::kBf16, Codec::kInt4, 1 << 20, false},
          {WorkFormat::kFp16, Codec::kInt6, 16384, false},
          {WorkFormat::kBf16Cast, Codec::kFp, (1 << 20) + 16, false},
          {WorkFormat::kFp16, Codec::kInt4, 600000, false}};
}

TEST_P(GroupTest, MixedCodecSequenceIsBitExact) {
  const int ws = group_->world_size();
  const std::vector<Op> ops = MixedCodecOps(ws);
  uint64_t seed = 31;
  // Twice through, so that every change also happens from a warm state.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Op& op : ops) {
      std::vector<std::vector<uint16_t>> in;
      for (int r = 0; r < ws; ++r) {
        in.push_back(testing::MakeInput(WorkFormatDType(op.elem), op.count, seed++, true));
      }
      RunAndCheck(op.elem, op.codec, op.count, in, /*in_place=*/false, op.one_shot);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(GroupTest, MixedCodecGraphReplayedStaysCorrect) {
  ReplayAndCheck(*group_, MixedCodecOps(group_->world_size()), 100);
}

// vLLM's TP4/TP8 hang: many calls alternating two shapes (different grids).
TEST_P(GroupTest, FiftyThousandCallsAlternatingShapesNeverHang) {
  const int ws = group_->world_size();
  const size_t counts[2] = {1024 * 1024, 1024 * 2048};
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<std::vector<std::vector<uint16_t>>> want(2);
  for (int k = 0; k < 2; ++k) {
    bufs.push_back(Alloc(*group_, counts[k]));
    ASSERT_NE(bufs.back(), nullptr);
    std::vector<std::vector<uint16_t>> in;
    std::vector<const uint16_t*> ip;
    std::vector<uint16_t*> op;
    want[k].assign(ws, std::vector<uint16_t>(counts[k]));
    for (int r = 0; r < ws; ++r) {
      in.push_back(k == 0 ? std::vector<uint16_t>(counts[k], 0)
                          : testing::MakeInput(DType::kFloat16, counts[k], 77 + r, false));
    }
    for (int r = 0; r < ws; ++r) {
      ip.push_back(in[r].data());
      op.push_back(want[k][r].data());
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      ASSERT_OK(gpu::Memcpy(bufs[k]->in[r], in[r].data(), counts[k] * 2));
    }
    ASSERT_OK(
        ReferenceAllReduce(testing::ReferenceParams(WorkFormat::kFp16, Codec::kInt4, ws, counts[k]),
                           ip.data(), op.data()));
  }
  constexpr int kCalls = 50000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    const int k = i % 2;
    LocalCall call{WorkFormat::kFp16, Codec::kInt4, counts[k], 10000};
    std::vector<const void*> ins(bufs[k]->in.begin(), bufs[k]->in.end());
    ASSERT_OK(group_->LaunchAll(call, ins, bufs[k]->out));
    if (i % 5000 == 4999 || i >= kCalls - 2) {
      ASSERT_OK(group_->Synchronize());
      for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone) << "call " << i;
      for (int r = 0; r < ws; ++r) {
        std::vector<uint16_t> got(counts[k]);
        ASSERT_OK(gpu::SetDevice(group_->device(r)));
        ASSERT_OK(gpu::Memcpy(got.data(), bufs[k]->out[r], counts[k] * 2));
        ASSERT_EQ(FirstDifference(got, want[k][r]), "") << "call " << i << " rank " << r;
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("50000 alternating calls: %.2f s (%.1f us/call)\n", s, s * 1e6 / kCalls);
}

// One-shot calls whose grids differ (1, 32 and 256 blocks) interleaved with
// a two-shot call: phases and per-call counters must stay in step.
TEST_P(GroupTest, TwentyThousandMixedOneShotCallsStayCorrect) {
  const int ws = group_->world_size();
  struct Op {
    size_t count;
    bool one_shot;
  };
  const Op ops[] = {{2048, true}, {1 << 18, true}, {(1 << 18) + 8, false}, {65536, true}};
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<std::vector<std::vector<uint16_t>>> want(std::size(ops));
  for (size_t k = 0; k < std::size(ops); ++k) {
    bufs.push_back(Alloc(*group_, ops[k].count));
    ASSERT_NE(bufs.back(), nullptr);
    std::vector<std::vector<uint16_t>> in;
    std::vector<const uint16_t*> ip;
    std::vector<uint16_t*> op;
    want[k].assign(ws, std::vector<uint16_t>(ops[k].count));
    for (int r = 0; r < ws; ++r) {
      in.push_back(testing::MakeInput(DType::kFloat16, ops[k].count, 500 + 10 * k + r, false));
    }
    for (int r = 0; r < ws; ++r) {
      ip.push_back(in[r].data());
      op.push_back(want[k][r].data());
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      ASSERT_OK(gpu::Memcpy(bufs[k]->in[r], in[r].data(), ops[k].count * 2));
    }
    ASSERT_OK(Reference(ops[k].one_shot,
                        testing::ReferenceParams(WorkFormat::kFp16, Codec::kInt8, ws, ops[k].count),
                        ip.data(), op.data()));
  }
  constexpr int kCalls = 20000;
  for (int i = 0; i < kCalls; ++i) {
    const size_t k = (i * 7 + i / 3) % std::size(ops);
    LocalCall call{WorkFormat::kFp16, Codec::kInt8, ops[k].count, 10000, ops[k].one_shot};
    std::vector<const void*> ins(bufs[k]->in.begin(), bufs[k]->in.end());
    ASSERT_OK(group_->LaunchAll(call, ins, bufs[k]->out));
    if (i % 2500 == 2499) {
      ASSERT_OK(group_->Synchronize());
      for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone) << "call " << i;
      for (size_t j = 0; j < std::size(ops); ++j) {
        for (int r = 0; r < ws; ++r) {
          std::vector<uint16_t> got(ops[j].count);
          ASSERT_OK(gpu::SetDevice(group_->device(r)));
          ASSERT_OK(gpu::Memcpy(got.data(), bufs[j]->out[r], ops[j].count * 2));
          ASSERT_EQ(FirstDifference(got, want[j][r]), "") << "call " << i << " op " << j;
        }
      }
    }
  }
}

TEST_F(TwoShotLocalTest, AbortWordStopsAWaitingKernelAndLaterCallsDrain) {
  auto buf = Alloc(*group_, 1 << 20);
  ASSERT_NE(buf, nullptr);
  // Only rank 0 calls: its kernel waits for a peer that never comes.
  LocalCall call{WorkFormat::kFp16, Codec::kFp, 1 << 20, 0};  // no timeout: only the abort ends it
  ASSERT_OK(group_->Launch(0, call, buf->in[0], buf->out[0]));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_OK(gpu::SetDevice(group_->device(0)));
  ASSERT_OK_AND_ASSIGN(bool done, gpu::StreamDone(group_->stream(0)));
  EXPECT_FALSE(done) << "the kernel should still be waiting for rank 1";
  group_->RaiseAbort();
  const double s = DrainSeconds(*group_, 0, 5.0);
  EXPECT_LT(s, 1.0) << "stream did not drain within 1 s of the abort";
  EXPECT_EQ(group_->error(0), kGpuErrorAborted);
  // The error is sticky: later calls return at once.
  for (int i = 0; i < 10; ++i) ASSERT_OK(group_->Launch(0, call, buf->in[0], buf->out[0]));
  EXPECT_LT(DrainSeconds(*group_, 0, 5.0), 0.5);
  std::printf("abort: stream drained %.1f ms after the abort word was raised\n", s * 1e3);
}

// A rank reads the abort word at most once per kAbortReadPeriodUs, whichever
// of its threads wait (two_shot_device.cuh, AbortRaised), and the others see
// it through the error word: an unbounded wait still ends soon after the
// word is raised, in a one-block grid where every thread polls and in a
// gated grid of many blocks.
TEST_F(TwoShotLocalTest, AbortWordStopsAWaitingOneShotKernel) {
  for (size_t count : {size_t{2048}, size_t{1} << 17}) {
    SCOPED_TRACE("count " + std::to_string(count));
    // The abort is sticky for the group: a fresh one per size.
    group_.reset();
    auto g = LocalGroup::Create(kWs, /*max_blocks=*/0, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
    auto buf = Alloc(*group_, count);
    ASSERT_NE(buf, nullptr);
    LocalCall call{WorkFormat::kBf16, Codec::kFp, count, /*timeout_ms=*/0, /*one_shot=*/true};
    ASSERT_OK(group_->Launch(0, call, buf->in[0], buf->out[0]));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_OK(gpu::SetDevice(group_->device(0)));
    ASSERT_OK_AND_ASSIGN(bool done, gpu::StreamDone(group_->stream(0)));
    EXPECT_FALSE(done) << "the kernel should still be waiting for rank 1";
    group_->RaiseAbort();
    EXPECT_LT(DrainSeconds(*group_, 0, 5.0), 1.0) << "stream did not drain within 1 s of the abort";
    EXPECT_EQ(group_->error(0), kGpuErrorAborted);
  }
}

// A rank that calls late must not find its call slowed down by the early
// rank's waiting. When every waiting block read the abort word (host memory)
// every 64 polls, those PCIe reads held up the late rank's launch and
// kernel: launched 50 µs after rank 0, rank 1's 1 MiB one-shot took
// 150-350 µs from its start event to its end instead of about 12 (one H200,
// docs/performance.md "Known problems"). The bound leaves 5x room over the
// healthy figure for a GPU shared by both ranks.
TEST_F(TwoShotLocalTest, LateRankIsNotSlowedByTheEarlyRanksWait) {
  constexpr size_t kCount = size_t{1} << 19;  // 1 MiB of fp16
  constexpr int kCalls = 30;
  auto buf = Alloc(*group_, kCount);
  ASSERT_NE(buf, nullptr);
  const LocalCall call{WorkFormat::kFp16, Codec::kFp, kCount, /*timeout_ms=*/2000,
                       /*one_shot=*/true};
  ASSERT_OK(gpu::SetDevice(group_->device(1)));
  ASSERT_OK_AND_ASSIGN(gpu::ScopedEvent start, gpu::ScopedEvent::Create());
  ASSERT_OK_AND_ASSIGN(gpu::ScopedEvent stop, gpu::ScopedEvent::Create());
  std::vector<double> late_us;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_OK(group_->Launch(0, call, buf->in[0], buf->out[0]));
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (std::chrono::steady_clock::now() < until) {
    }
    ASSERT_OK(gpu::SetDevice(group_->device(1)));
    ASSERT_OK(gpu::EventRecord(start.get(), group_->stream(1)));
    ASSERT_OK(group_->Launch(1, call, buf->in[1], buf->out[1]));
    ASSERT_OK(gpu::SetDevice(group_->device(1)));
    ASSERT_OK(gpu::EventRecord(stop.get(), group_->stream(1)));
    ASSERT_OK(group_->Synchronize());
    ASSERT_OK_AND_ASSIGN(float ms, gpu::EventElapsedMs(start.get(), stop.get()));
    late_us.push_back(ms * 1e3);
  }
  EXPECT_EQ(group_->error(0), kGpuErrorNone);
  EXPECT_EQ(group_->error(1), kGpuErrorNone);
  std::sort(late_us.begin(), late_us.end());
  const double median = late_us[kCalls / 2];
  std::printf("late rank: 1 MiB one-shot, launched 50 us late, median %.1f us, max %.1f us\n",
              median, late_us.back());
  EXPECT_LT(median, 60.0) << "the late rank's call is slowed by the early rank's wait";
}

TEST_F(TwoShotLocalTest, OneShotWaitTimesOutWhenThePeerNeverCalls) {
  auto buf = Alloc(*group_, 1 << 16);
  ASSERT_NE(buf, nullptr);
  LocalCall call{WorkFormat::kFp16, Codec::kFp, 1 << 16, 300, /*one_shot=*/true};
  ASSERT_OK(group_->Launch(0, call, buf->in[0], buf->out[0]));
  EXPECT_LT(DrainSeconds(*group_, 0, 5.0), 1.5);
  EXPECT_EQ(group_->error(0), kGpuErrorTimeout);
}

TEST_F(TwoShotLocalTest, BoundedWaitTimesOutAndSetsErrorWord) {
  auto buf = Alloc(*group_, 1 << 16);
  ASSERT_NE(buf, nullptr);
  LocalCall call{WorkFormat::kBf16, Codec::kInt4, 1 << 16, 300};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(group_->Launch(0, call, buf->in[0], buf->out[0]));
  const double s = DrainSeconds(*group_, 0, 5.0);
  EXPECT_LT(s, 1.5);
  EXPECT_GT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.25);
  EXPECT_EQ(group_->error(0), kGpuErrorTimeout);
}

// Checked before the GPU is touched (kernels/gpu/rank_state_test.cc has the
// rest), also with a GPU present and under compute-sanitizer.
TEST_F(TwoShotLocalTest, RejectsBadArguments) {
  auto buf = Alloc(*group_, 1 << 16);
  ASSERT_NE(buf, nullptr);
  using ::qr::testing::StatusIs;
  const LocalCall odd{WorkFormat::kFp16, Codec::kFp, 7};  // 14 bytes
  EXPECT_THAT(group_->Launch(0, odd, buf->in[0], buf->out[0]),
              StatusIs(StatusCode::kInvalidArgument));
  const LocalCall fine{WorkFormat::kFp16, Codec::kInt3, 8};
  EXPECT_THAT(group_->Launch(0, fine, nullptr, buf->out[0]),
              StatusIs(StatusCode::kInvalidArgument));
  // One atom more than one-shot holds.
  const LocalCall big{WorkFormat::kFp16, Codec::kFp, kOneShotRegionBytes / 2 / 2 + 8, 10000, true};
  EXPECT_THAT(group_->Launch(0, big, buf->in[0], buf->out[0]),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(group_->error(0), kGpuErrorNone);
}

}  // namespace
}  // namespace qr::kernels
