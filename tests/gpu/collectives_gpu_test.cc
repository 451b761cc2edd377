// Reduce-scatter and all-gather on GPUs (kernels/gpu/collective_kernels.cuh),
// every rank driven from one process (LocalGroup, the GPU backend's
// launcher): world sizes 2, 4 and 8 with their ranks sharing the GPUs there
// are (all on GPU 0 with one; grids capped as for QR_ALLOW_SHARED_DEVICE),
// every regime the world size runs, fp16 / bf16 / bf16 with the cast,
// per-rank counts from one atom to several tiles (not multiples of a shard),
// out of place and in place, and the one-shot choice of the policy. Every
// rank's output must equal the host reference (kernels/
// reduce_scatter_reference.h, kernels/all_gather_reference.h) bit for bit,
// with nothing written outside it. Then: more tiles than blocks, mixed
// sequences of all-reduces, reduce-scatters and all-gathers (slot rows
// reused across kinds, collective_kernels.cuh), a graph of them replayed,
// and a waiting reduce-scatter / all-gather ended by the abort word or the
// timeout.
#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/gpu/collectives_gpu_fixture.h"

namespace qr::kernels::collectives_gpu {
namespace {

TEST_P(CollectivesGpuTest, EqualsReferenceForEveryRegimeCountAndForm) {
  const int ws = group_->world_size();
  const size_t s = static_cast<size_t>(ShardElems(ws));
  // One atom, a partial shard, one shard (one tile), a tile and an atom, and
  // several tiles ending mid-shard.
  const size_t counts[] = {8, 1000, s, s + 8, 5 * s - 24};
  uint64_t seed = 1;
  for (Collective kind : {Collective::kReduceScatter, Collective::kAllGather}) {
    for (Codec codec : Codecs()) {
      for (size_t i = 0; i < std::size(counts); ++i) {
        RunAndCheck({kind, codec, counts[i], /*in_place=*/i % 2 == 1, Algorithm::kTwoShot}, seed++);
        if (HasFatalFailure()) return;
      }
    }
    // What the policy sends one-shot: exact values whatever the regime.
    RunAndCheck({kind, Codec::kInt4, s + 8, false, Algorithm::kOneShot}, seed++);
    RunAndCheck({kind, Codec::kFp, 1000, true, Algorithm::kOneShot}, seed++);
    if (HasFatalFailure()) return;
  }
}

// Mixed sequences, eager: every call's bits, with slot rows reused across
// kinds, codecs and sizes (the last tile's row of one call is the first
// write of the call after next).
TEST_P(CollectivesGpuTest, MixedSequenceOfAllKindsIsBitExact) {
  const int ws = group_->world_size();
  const size_t s = static_cast<size_t>(ShardElems(ws));
  const Codec q = ws == 2 ? Codec::kInt3 : Codec::kInt6;
  const std::vector<Op> ops = {
      {Collective::kReduceScatter, Codec::kInt4, 3 * s + 8, false, Algorithm::kTwoShot},
      {Collective::kReduceScatter, Codec::kFp, 8, true, Algorithm::kTwoShot},
      {Collective::kAllGather, Codec::kFp, 2 * s, false, Algorithm::kTwoShot},
      {Collective::kAllReduce, Codec::kInt8, ws * s + 64, false, Algorithm::kTwoShot},
      {Collective::kAllGather, q, s + 8, true, Algorithm::kTwoShot},
      {Collective::kReduceScatter, q, s, false, Algorithm::kTwoShot},
      {Collective::kAllReduce, Codec::kFp, 1024, false, Algorithm::kOneShot},
      {Collective::kAllGather, Codec::kInt8, 3 * s - 8, false, Algorithm::kTwoShot},
      {Collective::kAllReduce, Codec::kFp, 2 * ws * s, true, Algorithm::kTwoShot},
  };
  uint64_t seed = 100;
  for (int round = 0; round < 20; ++round) {
    for (const Op& op : ops) {
      RunAndCheck(op, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

// The same kinds captured into one graph per rank and replayed.
TEST_P(CollectivesGpuTest, GraphOfAllKindsReplayedStaysCorrect) {
  const int ws = group_->world_size();
  const size_t s = static_cast<size_t>(ShardElems(ws));
  ReplayGraphOf(
      {
          {Collective::kReduceScatter, Codec::kInt4, 2 * s + 8, false, Algorithm::kTwoShot},
          {Collective::kAllGather, Codec::kFp, 2 * s + 8, true, Algorithm::kTwoShot},
          {Collective::kAllReduce, Codec::kInt8, ws * s, false, Algorithm::kTwoShot},
          {Collective::kReduceScatter, Codec::kFp, 64, true, Algorithm::kTwoShot},
      },
      30);
}

INSTANTIATE_TEST_SUITE_P(WorldSizesAndFormats, CollectivesGpuTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                                              WorkFormat::kBf16Cast)),
                         WorldSizeAndFormatName);

// A grid of 3 blocks: every block runs several tiles of a call (the
// persistent loop and the row alternation inside a call).
class CollectivesFewBlocksTest : public CollectivesGpuTest {
 protected:
  void SetUp() override { CreateGroup(std::get<0>(GetParam()), /*max_blocks=*/3); }
};

TEST_P(CollectivesFewBlocksTest, MoreTilesThanBlocksIsBitExact) {
  const int ws = group_->world_size();
  const size_t s = static_cast<size_t>(ShardElems(ws));
  uint64_t seed = 900;
  for (Collective kind : {Collective::kReduceScatter, Collective::kAllGather}) {
    for (Codec codec : Codecs()) {
      RunAndCheck({kind, codec, 11 * s + 40, codec == Codec::kInt8, Algorithm::kTwoShot}, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesFewBlocksTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(WorkFormat::kBf16Cast)),
                         [](const ::testing::TestParamInfo<std::tuple<int, WorkFormat>>& info) {
                           return "ws" + std::to_string(std::get<0>(info.param));
                         });

// Only rank 0 calls, so its kernel waits for peers that never come: the
// abort word (a peer died; the backend turns it into QR_PEER_FAILED) or the
// wait's timeout ends it, and later calls drain at once (sticky error).
class CollectivesGiveUpTest : public ::testing::TestWithParam<Collective> {
 protected:
  void SetUp() override {
    if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
    auto g = LocalGroup::Create(2, /*max_blocks=*/0, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
    ASSERT_OK(gpu::SetDevice(group_->device(0)));
    for (void** p : {&in_, &out_}) {
      auto m = gpu::Malloc(2 * kCount * 2);
      ASSERT_OK(m.status());
      *p = *m;
    }
  }
  void TearDown() override {
    if (group_ == nullptr) return;
    (void)gpu::SetDevice(group_->device(0));
    gpu::Free(in_);
    gpu::Free(out_);
  }

  static constexpr size_t kCount = 1 << 18;
  std::unique_ptr<LocalGroup> group_;
  void* in_ = nullptr;
  void* out_ = nullptr;
};

TEST_P(CollectivesGiveUpTest, AbortWordStopsAWaitingKernelAndLaterCallsDrain) {
  LocalCall call{WorkFormat::kBf16, Codec::kInt4, kCount, 0};  // no timeout: only the abort
  call.collective = GetParam();
  ASSERT_OK(group_->Launch(0, call, in_, out_));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_OK(gpu::SetDevice(group_->device(0)));
  ASSERT_OK_AND_ASSIGN(bool done, gpu::StreamDone(group_->stream(0)));
  EXPECT_FALSE(done) << "the kernel should still be waiting for rank 1";
  group_->RaiseAbort();
  EXPECT_LT(DrainSeconds(*group_, 0, 5.0), 1.0) << "stream did not drain within 1 s of the abort";
  EXPECT_EQ(group_->error(0), kGpuErrorAborted);
  for (int i = 0; i < 10; ++i) ASSERT_OK(group_->Launch(0, call, in_, out_));
  EXPECT_LT(DrainSeconds(*group_, 0, 5.0), 0.5);
}

TEST_P(CollectivesGiveUpTest, WaitTimesOut) {
  LocalCall call{WorkFormat::kFp16, Codec::kFp, kCount, /*timeout_ms=*/50};
  call.collective = GetParam();
  ASSERT_OK(group_->Launch(0, call, in_, out_));
  EXPECT_LT(DrainSeconds(*group_, 0, 5.0), 2.0);
  EXPECT_EQ(group_->error(0), kGpuErrorTimeout);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CollectivesGiveUpTest,
                         ::testing::Values(Collective::kReduceScatter, Collective::kAllGather),
                         [](const ::testing::TestParamInfo<Collective>& info) {
                           return info.param == Collective::kReduceScatter ? "ReduceScatter"
                                                                           : "AllGather";
                         });

}  // namespace
}  // namespace qr::kernels::collectives_gpu
