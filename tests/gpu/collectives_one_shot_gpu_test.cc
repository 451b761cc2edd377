// The one-shot reduce-scatter and all-gather (kernels/gpu/one_shot_collectives.cu),
// which RankState runs for a call the policy sends one-shot whose wire fits
// the one-shot region (CollectiveRunsOneShot, kernels/gpu/collective_request.h;
// every case below asserts that it does): world sizes 2, 4 and 8 sharing the
// GPUs there are, every regime (one-shot moves exact values whatever the
// regime) and format, counts from one atom to the largest whole message of
// the region, rows past the one-shot stride (a block owning several rows),
// in place and out of place, every 16-bit pattern (the all-gather's words
// copy NaN payloads and 0xFFFF), interleaved with plain one-shot all-reduces
// of other sizes and two-shot calls on the same group (the one-shot region's
// areas and per-block counts shared), a replayed graph, and a waiting call
// ended by the timeout. Outputs equal the host reference for kOneShot bit
// for bit, with nothing written outside them.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/geometry.h"
#include "kernels/gpu/collective_request.h"
#include "tests/gpu/collectives_gpu_fixture.h"

namespace qr::kernels::collectives_gpu {
namespace {

constexpr size_t kRowElems = 256 * 8;  // one slot row: kOneShotThreads atoms

class CollectivesOneShotGpuTest : public CollectivesGpuTest {
 protected:
  // The one-shot kernels' stride (OneShotStrideBlocks): slot rows of a
  // source's part of the region, capped at the layout's blocks.
  int64_t StrideRows() const {
    const int64_t rows = OneShotMaxBytes(group_->world_size()) / 4096;
    return std::min<int64_t>(rows, group_->max_blocks());
  }

  // Per-rank counts of `kind` that run one-shot: one atom, a partial row,
  // one row, rows past the stride where they fit, and the largest whole
  // message a one-shot all-reduce takes (world_size chunks of it).
  std::vector<size_t> Counts(Collective kind) const {
    const int ws = group_->world_size();
    std::vector<size_t> counts = {8, 1000, kRowElems, 3 * kRowElems - 40,
                                  static_cast<size_t>(OneShotMaxElems(ws) / ws)};
    const size_t past_stride = static_cast<size_t>(StrideRows() + 1) * kRowElems + 24;
    if (OneShotCollectiveFits(kind, static_cast<int64_t>(past_stride), ws)) {
      counts.push_back(past_stride);
    }
    return counts;
  }

  void RunOneShot(const Op& op, uint64_t seed) {
    ASSERT_TRUE(CollectiveRunsOneShot(op.kind, op.algorithm, static_cast<int64_t>(op.count),
                                      group_->world_size()))
        << OpName(op, format()) << " would not run the one-shot kernel";
    RunAndCheck(op, seed);
  }
};

TEST_P(CollectivesOneShotGpuTest, EqualsReferenceForEveryRegimeCountAndForm) {
  uint64_t seed = 2000;
  for (Collective kind : {Collective::kReduceScatter, Collective::kAllGather}) {
    const std::vector<size_t> counts = Counts(kind);
    for (Codec codec : Codecs()) {
      for (size_t i = 0; i < counts.size(); ++i) {
        RunOneShot({kind, codec, counts[i], /*in_place=*/i % 2 == 1, Algorithm::kOneShot}, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Every 16-bit value on every rank (NaN payloads, 0xFFFF, 0x0000, the bytes
// 0x00 and 0xFF of the all-gather's words), against the reference: the
// all-gather copies them all, the reduce-scatter sums them as the one-shot
// all-reduce does.
TEST_P(CollectivesOneShotGpuTest, EveryBitPatternEqualsTheReference) {
  const int ws = group_->world_size();
  const WorkFormat f = format();
  for (Collective kind : {Collective::kAllGather, Collective::kReduceScatter}) {
    const Op op{kind, Codec::kFp, 65536, kind == Collective::kAllGather, Algorithm::kOneShot};
    SCOPED_TRACE(OpName(op, f));
    ASSERT_TRUE(CollectiveRunsOneShot(op.kind, op.algorithm, 65536, ws));
    auto b = MakeBuffers(op);
    ASSERT_NE(b, nullptr);
    OpData d;
    for (int r = 0; r < ws; ++r) {
      std::vector<uint16_t> in(InElems(op, ws));
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i * 40503u + r * 7u);
      d.in.push_back(std::move(in));
    }
    ComputeWant(op, f, &d);
    Upload(op, *b, d, /*async=*/false);
    ASSERT_OK(group_->LaunchAll(CallOf(op, f), b->in, b->out));
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);
    Check(op, *b, d, OpName(op, f));
  }
}

// One-shot reduce-scatters and all-gathers between plain one-shot
// all-reduces of other sizes (a call of few rows advances the counts of few
// blocks, so the blocks' counts, and the phases of their rows, drift apart)
// and two-shot calls, eager, many rounds: every call's bits.
TEST_P(CollectivesOneShotGpuTest, InterleavedWithOneShotAllReducesIsBitExact) {
  const int ws = group_->world_size();
  const size_t s = static_cast<size_t>(ShardElems(ws));
  const size_t many_rows = static_cast<size_t>(StrideRows() + 2) * kRowElems;
  const size_t ar_rows = std::min(many_rows, static_cast<size_t>(OneShotMaxElems(ws)));
  const std::vector<Op> ops = {
      {Collective::kReduceScatter, Codec::kInt4, 3 * kRowElems + 8, false, Algorithm::kOneShot},
      {Collective::kAllReduce, Codec::kFp, 1024, false, Algorithm::kOneShot},
      {Collective::kAllGather, Codec::kFp, kRowElems, true, Algorithm::kOneShot},
      {Collective::kAllReduce, Codec::kFp, ar_rows, true, Algorithm::kOneShot},
      {Collective::kAllGather, Codec::kInt8, 8, false, Algorithm::kOneShot},
      {Collective::kReduceScatter, Codec::kFp, 2 * s + 8, true, Algorithm::kTwoShot},
      {Collective::kReduceScatter, Codec::kFp, 1000, true, Algorithm::kOneShot},
      {Collective::kAllReduce, Codec::kFp, 8, false, Algorithm::kOneShot},
      {Collective::kAllGather, Codec::kFp, Counts(Collective::kAllGather).back(), false,
       Algorithm::kOneShot},
      {Collective::kAllReduce, Codec::kInt8, ws * s, false, Algorithm::kTwoShot},
  };
  uint64_t seed = 3000;
  for (int round = 0; round < 12; ++round) {
    for (const Op& op : ops) {
      if (op.kind != Collective::kAllReduce && op.algorithm == Algorithm::kOneShot) {
        RunOneShot(op, seed++);
      } else {
        RunAndCheck(op, seed++);
      }
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(CollectivesOneShotGpuTest, GraphWithOneShotFormsReplayedStaysCorrect) {
  ReplayGraphOf(
      {
          {Collective::kReduceScatter, Codec::kInt4, kRowElems + 8, false, Algorithm::kOneShot},
          {Collective::kAllReduce, Codec::kFp, 4096, true, Algorithm::kOneShot},
          {Collective::kAllGather, Codec::kFp, 2 * kRowElems, true, Algorithm::kOneShot},
          {Collective::kAllGather, Codec::kInt4, 64, false, Algorithm::kTwoShot},
          {Collective::kReduceScatter, Codec::kFp, 64, true, Algorithm::kOneShot},
      },
      30);
}

INSTANTIATE_TEST_SUITE_P(WorldSizesAndFormats, CollectivesOneShotGpuTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                                              WorkFormat::kBf16Cast)),
                         WorldSizeAndFormatName);

// Only rank 0 calls: its one-shot kernel polls for peers that never come
// until the wait's timeout, and later calls drain at once (sticky error).
class CollectivesOneShotGiveUpTest : public ::testing::TestWithParam<Collective> {};

TEST_P(CollectivesOneShotGiveUpTest, WaitTimesOutAndLaterCallsDrain) {
  if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalGroup> g,
                       LocalGroup::Create(2, /*max_blocks=*/0, TestGpus()));
  constexpr size_t kCount = 1 << 14;
  ASSERT_TRUE(CollectiveRunsOneShot(GetParam(), Algorithm::kOneShot, kCount, 2));
  ASSERT_OK(gpu::SetDevice(g->device(0)));
  ASSERT_OK_AND_ASSIGN(void* in, gpu::Malloc(2 * kCount * 2));
  ASSERT_OK_AND_ASSIGN(void* out, gpu::Malloc(2 * kCount * 2));
  LocalCall call{WorkFormat::kFp16, Codec::kFp, kCount, /*timeout_ms=*/50, /*one_shot=*/true};
  call.collective = GetParam();
  ASSERT_OK(g->Launch(0, call, in, out));
  EXPECT_LT(DrainSeconds(*g, 0, 5.0), 2.0);
  EXPECT_EQ(g->error(0), kGpuErrorTimeout);
  for (int i = 0; i < 10; ++i) ASSERT_OK(g->Launch(0, call, in, out));
  EXPECT_LT(DrainSeconds(*g, 0, 5.0), 0.5);
  ASSERT_OK(gpu::SetDevice(g->device(0)));
  gpu::Free(in);
  gpu::Free(out);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CollectivesOneShotGiveUpTest,
                         ::testing::Values(Collective::kReduceScatter, Collective::kAllGather),
                         [](const ::testing::TestParamInfo<Collective>& info) {
                           return info.param == Collective::kReduceScatter ? "ReduceScatter"
                                                                           : "AllGather";
                         });

}  // namespace
}  // namespace qr::kernels::collectives_gpu
