// RankState's validation of its join-time configuration and of each request,
// all of which happens before the GPU is touched (no GPU needed; runs in CI).
// The addresses below are never dereferenced: every case stops at a check or
// has nothing to launch.
#include "kernels/gpu/rank_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/geometry.h"
#include "kernels/gpu/collective_request.h"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/platform.h"
#include "kernels/types.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

uint32_t words[TwoShotStateWords(64)];
uint32_t error_word;
char buffers[kMaxWorldSize][16];

RankConfig Config(int world_size, int rank = 0) {
  RankConfig c;
  c.rank = rank;
  c.world_size = world_size;
  for (int r = 0; r < world_size; ++r) c.buffers[r] = buffers[r];
  c.max_blocks = 64;
  c.state_words = words;
  c.error_word = &error_word;
  c.ticks_per_ms = 1000000;  // a nanosecond clock, as on NVIDIA
  return c;
}

AllReduceRequest Request(size_t count, Codec codec = Codec::kFp,
                         Algorithm algorithm = Algorithm::kTwoShot) {
  AllReduceRequest r;
  r.count = count;
  r.codec = codec;
  r.algorithm = algorithm;
  return r;
}

Status CreateStatus(const RankConfig& c) { return RankState::Create(c).status(); }

TEST(RankStateTest, CreateRejectsBadConfigurations) {
  EXPECT_THAT(CreateStatus(Config(3)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateStatus(Config(2, 2)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("rank 2 out of range")));
  EXPECT_THAT(CreateStatus(Config(2, -1)), StatusIs(StatusCode::kInvalidArgument));
  RankConfig c = Config(4);
  c.buffers[3] = nullptr;
  EXPECT_THAT(CreateStatus(c),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing receive buffer")));
  c = Config(2);
  c.max_blocks = 0;
  EXPECT_THAT(CreateStatus(c), StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_blocks")));
  c = Config(2);
  c.ticks_per_ms = 0;  // the abort word's read period would be no time at all
  EXPECT_THAT(CreateStatus(c), StatusIs(StatusCode::kInvalidArgument, HasSubstr("ticks_per_ms")));
  c = Config(2);
  c.state_words = nullptr;
  EXPECT_THAT(CreateStatus(c), StatusIs(StatusCode::kInvalidArgument, HasSubstr("null pointer")));
  c = Config(2);
  c.error_word = nullptr;
  EXPECT_THAT(CreateStatus(c), StatusIs(StatusCode::kInvalidArgument, HasSubstr("null pointer")));
  // The abort word is optional.
  EXPECT_OK(CreateStatus(Config(8, 7)));
}

TEST(RankStateTest, LayoutFollowsTheGridCap) {
  ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(2, 1)));
  EXPECT_EQ(s.rank(), 1);
  EXPECT_EQ(s.world_size(), 2);
  EXPECT_EQ(s.max_blocks(), 64);
  EXPECT_EQ(s.layout().total, MakeTwoShotLayout(64).total);
  EXPECT_EQ(s.layout().oneshot, MakeTwoShotLayout(64).oneshot);
}

TEST(RankStateTest, LaunchRejectsBadRequestsBeforeTouchingTheGpu) {
  ASSERT_OK_AND_ASSIGN(RankState s2, RankState::Create(Config(2)));
  ASSERT_OK_AND_ASSIGN(RankState s4, RankState::Create(Config(4)));
  EXPECT_THAT(s4.Launch(Request(8, Codec::kInt3), nullptr),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("INT3 needs world size 2")));
  EXPECT_THAT(s2.Launch(Request(7), nullptr),  // 14 bytes
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("multiple of 16")));
  EXPECT_THAT(s2.Launch(Request(8), nullptr),  // null in and out
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("null pointer")));
  AllReduceRequest r = Request(8);
  r.in = buffers[0];
  r.out = buffers[1];
  r.format = static_cast<WorkFormat>(7);
  EXPECT_THAT(s2.Launch(r, nullptr),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unsupported dtype")));
  EXPECT_OK(s2.Launch(Request(0), nullptr));  // nothing to do
}

TEST(RankStateTest, OneShotRejectsWhatDoesNotFit) {
  for (int ws : {2, 4, 8}) {
    ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(ws)));
    // One 16-byte atom more than a source's share of the region.
    const size_t share = kOneShotRegionBytes / ws / 2;
    EXPECT_THAT(s.Launch(Request(share + 8, Codec::kFp, Algorithm::kOneShot), nullptr),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("one-shot takes at most")))
        << ws;
    // Exactly the share: past the size check, stopped by the null buffers.
    EXPECT_THAT(s.Launch(Request(share, Codec::kFp, Algorithm::kOneShot), nullptr),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("null pointer")))
        << ws;
    EXPECT_TRUE(s.Launch(Request(0, Codec::kFp, Algorithm::kOneShot), nullptr).ok()) << ws;
  }
}

TEST(RankStateTest, OneShotIgnoresTheCodec) {
  ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(4)));
  // Two-shot refuses INT3 at world size 4; one-shot moves exact values.
  EXPECT_OK(s.Launch(Request(0, Codec::kInt3, Algorithm::kOneShot), nullptr));
  EXPECT_THAT(s.Launch(Request(0, Codec::kInt3), nullptr), StatusIs(StatusCode::kInvalidArgument));
}

AllReduceRequest CollectiveRequest(Collective kind, size_t count, Codec codec,
                                   Algorithm algorithm = Algorithm::kTwoShot) {
  AllReduceRequest r = Request(count, codec, algorithm);
  r.collective = kind;
  return r;
}

TEST(RankStateTest, ReduceScatterAndAllGatherAreValidatedAsTheirPhaseKernel) {
  ASSERT_OK_AND_ASSIGN(RankState s2, RankState::Create(Config(2)));
  ASSERT_OK_AND_ASSIGN(RankState s4, RankState::Create(Config(4)));
  for (Collective kind : {Collective::kReduceScatter, Collective::kAllGather}) {
    SCOPED_TRACE(static_cast<int>(kind));
    EXPECT_THAT(s4.Launch(CollectiveRequest(kind, 8, Codec::kInt3), nullptr),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("INT3 needs world size 2")));
    // The policy's one-shot choice runs the FP phase kernel: INT3 is not
    // asked for, and no one-shot size limit applies (a per-rank count
    // larger than a one-shot source's share stops at the null buffers).
    EXPECT_OK(s4.Launch(CollectiveRequest(kind, 0, Codec::kInt3, Algorithm::kOneShot), nullptr));
    const size_t share = kOneShotRegionBytes / 2 / 2;
    EXPECT_THAT(
        s2.Launch(CollectiveRequest(kind, share + 8, Codec::kFp, Algorithm::kOneShot), nullptr),
        StatusIs(StatusCode::kInvalidArgument, HasSubstr("null pointer")));
    EXPECT_THAT(s2.Launch(CollectiveRequest(kind, 12, Codec::kInt4), nullptr),  // 24-byte shards
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("multiple of 16")));
    EXPECT_OK(s2.Launch(CollectiveRequest(kind, 0, Codec::kInt4), nullptr));
  }
  // The fused collective has a launch of its own.
  EXPECT_THAT(
      s2.Launch(CollectiveRequest(Collective::kAllReduceResidualRmsNorm, 8, Codec::kFp), nullptr),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("LaunchResidualRmsNorm")));
}

// The references' rules (ReduceScatterParamsFor, AllGatherParamsFor): a
// one-shot choice moves exact values, an FP all-gather copies bits.
TEST(CollectiveRequestTest, PhaseKernelFollowsTheReferencesParams) {
  constexpr auto kRs = Collective::kReduceScatter;
  constexpr auto kAg = Collective::kAllGather;
  constexpr auto kTwo = Algorithm::kTwoShot;
  constexpr auto kOne = Algorithm::kOneShot;
  auto is = [](PhaseKernelChoice c, WorkFormat f, Codec k) {
    return c.format == f && c.codec == k;
  };
  // Reduce-scatter two-shot: as asked, the cast included.
  EXPECT_TRUE(is(CollectivePhaseKernel(kRs, WorkFormat::kBf16Cast, Codec::kInt4, kTwo),
                 WorkFormat::kBf16Cast, Codec::kInt4));
  EXPECT_TRUE(is(CollectivePhaseKernel(kRs, WorkFormat::kBf16Cast, Codec::kFp, kTwo),
                 WorkFormat::kBf16Cast, Codec::kFp));
  // Reduce-scatter one-shot: FP, the cast off.
  EXPECT_TRUE(is(CollectivePhaseKernel(kRs, WorkFormat::kBf16Cast, Codec::kInt8, kOne),
                 WorkFormat::kBf16, Codec::kFp));
  EXPECT_TRUE(is(CollectivePhaseKernel(kRs, WorkFormat::kFp16, Codec::kInt3, kOne),
                 WorkFormat::kFp16, Codec::kFp));
  // All-gather: FP or one-shot copies bits (no cast); quantized as asked.
  EXPECT_TRUE(is(CollectivePhaseKernel(kAg, WorkFormat::kBf16Cast, Codec::kFp, kTwo),
                 WorkFormat::kBf16, Codec::kFp));
  EXPECT_TRUE(is(CollectivePhaseKernel(kAg, WorkFormat::kBf16Cast, Codec::kInt6, kOne),
                 WorkFormat::kBf16, Codec::kFp));
  EXPECT_TRUE(is(CollectivePhaseKernel(kAg, WorkFormat::kBf16Cast, Codec::kInt6, kTwo),
                 WorkFormat::kBf16Cast, Codec::kInt6));
  EXPECT_TRUE(is(CollectivePhaseKernel(kAg, WorkFormat::kFp16, Codec::kInt4, kTwo),
                 WorkFormat::kFp16, Codec::kInt4));
  // The all-reduce is not this function's business.
  EXPECT_TRUE(
      is(CollectivePhaseKernel(Collective::kAllReduce, WorkFormat::kBf16Cast, Codec::kInt4, kOne),
         WorkFormat::kBf16Cast, Codec::kInt4));
}

TEST(RankStateTest, MovedStateStillLaunches) {
  ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(2)));
  RankState moved(std::move(s));
  EXPECT_EQ(moved.world_size(), 2);
  EXPECT_THAT(moved.Launch(Request(7), nullptr), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace qr::kernels

namespace qr::kernels {
namespace {

alignas(16) char rows[4][4096 * 2 * 2];

ResidualRmsNormRequest Norm(size_t tokens, size_t hidden) {
  ResidualRmsNormRequest n;
  n.dtype = DType::kFloat16;
  n.residual = rows[0];
  n.weight = rows[1];
  n.residual_out = rows[2];
  n.norm_out = rows[3];
  n.tokens = tokens;
  n.hidden = hidden;
  return n;
}

// One launch exactly for one-shot requests whose rows fit the fused slots
// (one_shot_fused_slots.h), one row per block, and that allow it.
TEST(RankStateTest, FusedOneLaunchFollowsTheSlotRule) {
  ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(2)));
  AllReduceRequest r = Request(2 * 4096, Codec::kFp, Algorithm::kOneShot);
  r.out = rows[3];
  ResidualRmsNormRequest n = Norm(2, 4096);
  EXPECT_TRUE(s.FusedOneLaunch(r, n));
  n.one_launch = false;
  EXPECT_FALSE(s.FusedOneLaunch(r, n));
  n.one_launch = true;
  r.algorithm = Algorithm::kTwoShot;
  EXPECT_FALSE(s.FusedOneLaunch(r, n));
  // The whole one-shot region (4 MiB at world size 2) on 64 blocks: block 0
  // owns one more token row than its share of the slots.
  r.algorithm = Algorithm::kOneShot;
  const size_t hidden = 8192;
  const size_t tokens = static_cast<size_t>(OneShotMaxElems(2)) / hidden;
  r.count = tokens * hidden;
  n = Norm(tokens, hidden);
  EXPECT_EQ(
      s.FusedOneLaunch(r, n),
      FusedOneLaunchPays(FusedShapeOf(static_cast<int64_t>(tokens), static_cast<int64_t>(hidden),
                                      64, 2, 608, FusedRowForm::kPolicy, GpuBlockClusters()),
                         static_cast<int64_t>(tokens)));
  // 64 layout blocks: beyond 32 rows of 4096 values (32 blocks of 512
  // threads), the lane-threads form's 64 blocks of 256 threads; a block
  // walks at most kFusedOneLaunchMaxRows rows by default.
  r.count = 128 * 4096;
  EXPECT_TRUE(s.FusedOneLaunch(r, Norm(128, 4096)));
  r.count = 129 * 4096;
  EXPECT_FALSE(s.FusedOneLaunch(r, Norm(129, 4096)));
  // Asked for always: one launch wherever the kernel fits.
  n = Norm(129, 4096);
  n.one_launch_always = true;
  EXPECT_TRUE(s.FusedOneLaunch(r, n));
  n.one_launch = false;
  EXPECT_FALSE(s.FusedOneLaunch(r, n));
  // Rows of 8192 values: 32 blocks of 512 threads (two chunks a thread),
  // two rows each at most.
  r.count = 64 * 8192;
  EXPECT_TRUE(s.FusedOneLaunch(r, Norm(64, 8192)));
  r.count = 65 * 8192;
  EXPECT_FALSE(s.FusedOneLaunch(r, Norm(65, 8192)));
  // Rows of 16384 values: eight parts of 256 threads.
  r.count = 1 * 16384;
  EXPECT_TRUE(s.FusedOneLaunch(r, Norm(1, 16384)));
  // Rows of more than 65536 values: no block takes a part of them.
  r.count = 1 * 131072;
  n = Norm(1, 131072);
  n.one_launch_always = true;
  EXPECT_FALSE(s.FusedOneLaunch(r, n));
}

// The row-split form exactly for two-shot requests that allow it and whose
// rows split as kernels/fused_split.h requires.
TEST(RankStateTest, SplitRowsFollowsTheExactnessRule) {
  ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(2)));
  AllReduceRequest r = Request(2 * 4096, Codec::kFp, Algorithm::kTwoShot);
  r.out = rows[3];
  ResidualRmsNormRequest n = Norm(2, 4096);
  // Off unless asked for (measured slower than the two launches).
  EXPECT_FALSE(s.SplitRows(r, n));
  n.split_rows = true;
  EXPECT_TRUE(s.SplitRows(r, n));
  n.split_rows = false;
  EXPECT_FALSE(s.SplitRows(r, n));
  n.split_rows = true;
  r.algorithm = Algorithm::kOneShot;
  EXPECT_FALSE(s.SplitRows(r, n));
  r.algorithm = Algorithm::kTwoShot;
  r.format = WorkFormat::kBf16Cast;
  EXPECT_TRUE(s.SplitRows(r, n));
  r.codec = Codec::kInt4;
  EXPECT_FALSE(s.SplitRows(r, n));  // the cast's lost bits
  r.format = WorkFormat::kFp16;
  EXPECT_TRUE(s.SplitRows(r, n));
  // 3 rows over 2 ranks; 2 rows of 8 (8 values per rank, not a block).
  n = Norm(3, 8);
  n.split_rows = true;
  r.count = 24;
  EXPECT_FALSE(s.SplitRows(r, n));
  n = Norm(2, 8);
  n.split_rows = true;
  r.count = 16;
  EXPECT_FALSE(s.SplitRows(r, n));
  r.codec = Codec::kFp;
  EXPECT_TRUE(s.SplitRows(r, n));
}

// The epilogue's checks run before the all-reduce is enqueued: a misaligned
// residual_out fails the call and nothing is launched (no GPU here: a launch
// would fail with kInternal instead).
TEST(RankStateTest, ResidualRmsNormChecksTheEpilogueFirst) {
  ASSERT_OK_AND_ASSIGN(RankState s, RankState::Create(Config(2)));
  AllReduceRequest r = Request(2 * 4096, Codec::kFp, Algorithm::kTwoShot);
  r.in = rows[0];
  r.out = rows[3];
  ResidualRmsNormRequest n = Norm(2, 4096);
  n.residual_out = rows[2] + 8;
  EXPECT_THAT(s.LaunchResidualRmsNorm(r, n, nullptr),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("aligned")));
  n = Norm(2, 4096);
  n.dtype = DType::kBFloat16;
  EXPECT_THAT(s.LaunchResidualRmsNorm(r, n, nullptr), StatusIs(StatusCode::kInvalidArgument));
}

TEST(RankStateTest, ProgrammaticLaunchComesFromTheEnvironment) {
  RankConfig c = Config(2);
  ASSERT_EQ(setenv("QR_PROGRAMMATIC_LAUNCH", "maybe", 1), 0);
  EXPECT_THAT(CreateStatus(c), StatusIs(StatusCode::kInvalidArgument));
  c.programmatic_launch = 1;  // explicit: the environment is not read
  EXPECT_OK(CreateStatus(c));
  ASSERT_EQ(unsetenv("QR_PROGRAMMATIC_LAUNCH"), 0);
  c.programmatic_launch = -1;
  EXPECT_OK(CreateStatus(c));
}

}  // namespace
}  // namespace qr::kernels
