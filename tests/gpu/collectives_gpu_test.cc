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

#include <algorithm>
#include <chrono>
#include <deque>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/all_gather_reference.h"
#include "kernels/geometry.h"
#include "kernels/gpu/local_group.h"
#include "kernels/one_shot_reference.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/reduce_scatter_reference.h"
#include "kernels/two_shot_reference.h"
#include "tests/gpu/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::FirstDifference;

constexpr uint16_t kPoison = 0xA5A5;

int TestGpus() { return std::min(gpu::DeviceCount(), 2); }

// One device allocation, freed on its device. Kept in a deque: growing it
// never copies an element (a copy would free twice).
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

// One call of one kind, as every rank issues it.
struct Op {
  Collective kind = Collective::kReduceScatter;
  Codec codec = Codec::kFp;
  size_t count = 0;  // per rank
  bool in_place = false;
  Algorithm algorithm = Algorithm::kTwoShot;
};

std::string OpName(const Op& op, WorkFormat format) {
  const char* kind = op.kind == Collective::kReduceScatter ? "reduce-scatter"
                     : op.kind == Collective::kAllGather   ? "all-gather"
                                                           : "all-reduce";
  return std::string(kind) + " " + CodecName(op.codec) + " " + WorkFormatName(format) +
         " count=" + std::to_string(op.count) + (op.in_place ? " in-place" : "") +
         (op.algorithm == Algorithm::kOneShot ? " one-shot" : "");
}

// Values of a rank's input and output buffers.
size_t InElems(const Op& op, int ws) {
  return op.kind == Collective::kReduceScatter ? ws * op.count : op.count;
}
size_t OutElems(const Op& op, int ws) {
  return op.kind == Collective::kAllGather ? ws * op.count : op.count;
}

// Every rank's buffers of one op, poisoned past the values: `whole[r]` is
// the allocation (the input, or the all-gather's output when in place) of
// `whole_elems` values + 8 of poison; in[r] / out[r] point into it or to a
// second allocation.
struct OpBuffers {
  std::deque<DeviceVec> keep;
  std::vector<void*> whole;
  size_t whole_elems = 0;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<void*> separate_out;  // nullptr when out lies in whole
};

// Host data and the reference's outputs of one op.
struct OpData {
  std::vector<std::vector<uint16_t>> in, want;
};

class CollectivesGpuTest : public ::testing::TestWithParam<std::tuple<int, WorkFormat>> {
 protected:
  void SetUp() override { CreateGroup(std::get<0>(GetParam()), /*max_blocks=*/0); }

  void CreateGroup(int ws, int max_blocks) {
    if (TestGpus() == 0) GTEST_SKIP() << "needs a GPU, found none";
    auto g = LocalGroup::Create(ws, max_blocks, TestGpus());
    ASSERT_OK(g.status());
    group_ = std::move(*g);
  }

  WorkFormat format() const { return std::get<1>(GetParam()); }

  void* Alloc(int rank, size_t elems, std::deque<DeviceVec>* keep) {
    const size_t bytes = (elems + 8) * 2;
    EXPECT_OK(gpu::SetDevice(group_->device(rank)));
    auto m = gpu::Malloc(bytes);
    EXPECT_OK(m.status());
    keep->emplace_back();
    keep->back().device = group_->device(rank);
    keep->back().p = m.ok() ? *m : nullptr;
    if (m.ok()) EXPECT_OK(gpu::Memset(*m, 0xA5, bytes));
    return m.ok() ? *m : nullptr;
  }

  // Buffers for `op` on every rank; the in-place forms are NCCL's: a
  // reduce-scatter's out is in + rank * count, an all-gather's in is out +
  // rank * count.
  std::unique_ptr<OpBuffers> MakeBuffers(const Op& op) {
    const int ws = group_->world_size();
    auto b = std::make_unique<OpBuffers>();
    const bool rs = op.kind != Collective::kAllGather;
    b->whole_elems = rs ? InElems(op, ws) : OutElems(op, ws);
    for (int r = 0; r < ws; ++r) {
      void* whole = Alloc(r, b->whole_elems, &b->keep);
      if (whole == nullptr) return nullptr;
      uint16_t* w = static_cast<uint16_t*>(whole);
      b->whole.push_back(whole);
      void* other = nullptr;
      if (!op.in_place) {
        other = Alloc(r, rs ? OutElems(op, ws) : InElems(op, ws), &b->keep);
        if (other == nullptr) return nullptr;
      }
      b->separate_out.push_back(rs ? other : nullptr);
      const size_t mine = op.kind == Collective::kAllReduce ? 0 : r * op.count;
      if (rs) {
        b->in.push_back(w);
        b->out.push_back(op.in_place ? static_cast<void*>(w + mine) : other);
      } else {
        b->out.push_back(w);
        b->in.push_back(op.in_place ? static_cast<const void*>(w + mine) : other);
      }
    }
    return b;
  }

  // Fresh inputs for `op` and the reference's outputs.
  OpData MakeData(const Op& op, WorkFormat f, uint64_t seed) {
    const int ws = group_->world_size();
    OpData d;
    const DType dtype = WorkFormatDType(f);
    for (int r = 0; r < ws; ++r) {
      d.in.push_back(testing::MakeInput(dtype, InElems(op, ws), seed * 7919 + r, seed % 2 == 0));
      d.want.emplace_back(OutElems(op, ws));
    }
    std::vector<const uint16_t*> ins;
    std::vector<uint16_t*> outs;
    for (int r = 0; r < ws; ++r) {
      ins.push_back(d.in[r].data());
      outs.push_back(d.want[r].data());
    }
    const TwoShotParams p = testing::ReferenceParams(f, op.codec, ws, op.count);
    switch (op.kind) {
      case Collective::kReduceScatter:
        EXPECT_OK(ReferenceReduceScatter(ReduceScatterParamsFor(p, op.algorithm), ins.data(),
                                         outs.data()));
        break;
      case Collective::kAllGather:
        EXPECT_OK(ReferenceAllGather(AllGatherParamsFor(p, op.algorithm), ins.data(), outs.data()));
        break;
      default:
        EXPECT_OK(op.algorithm == Algorithm::kOneShot
                      ? ReferenceOneShotAllReduce(p, ins.data(), outs.data())
                      : ReferenceAllReduce(p, ins.data(), outs.data()));
        break;
    }
    return d;
  }

  // Copies the inputs of `d` into `b` on every rank (stream-ordered on the
  // rank's stream when `async`).
  void Upload(const Op& op, const OpBuffers& b, const OpData& d, bool async) {
    const int ws = group_->world_size();
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      void* dst = const_cast<void*>(b.in[r]);
      const size_t bytes = InElems(op, ws) * 2;
      if (async) {
        ASSERT_OK(gpu::MemcpyAsync(dst, d.in[r].data(), bytes, group_->stream(r)));
      } else {
        ASSERT_OK(gpu::Memcpy(dst, d.in[r].data(), bytes));
      }
    }
  }

  LocalCall CallOf(const Op& op, WorkFormat f) const {
    LocalCall call{f, op.codec, op.count, 10000, op.algorithm == Algorithm::kOneShot};
    call.collective = op.kind;
    return call;
  }

  // Every rank's output against the reference, and what lies around it:
  // the poison past the allocations, and (in place) the reduce-scatter's
  // other chunks of the input left as they were.
  void Check(const Op& op, const OpBuffers& b, const OpData& d, const std::string& where) {
    const int ws = group_->world_size();
    for (int r = 0; r < ws; ++r) {
      SCOPED_TRACE(where + " rank " + std::to_string(r));
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      std::vector<uint16_t> whole(b.whole_elems + 8);
      ASSERT_OK(gpu::Memcpy(whole.data(), b.whole[r], whole.size() * 2));
      for (size_t i = b.whole_elems; i < whole.size(); ++i) ASSERT_EQ(whole[i], kPoison) << i;
      std::vector<uint16_t> got(OutElems(op, ws) + 8, kPoison);
      if (b.separate_out[r] != nullptr) {
        ASSERT_OK(gpu::Memcpy(got.data(), b.separate_out[r], got.size() * 2));
        for (size_t i = OutElems(op, ws); i < got.size(); ++i) ASSERT_EQ(got[i], kPoison) << i;
      } else if (op.kind == Collective::kReduceScatter) {
        const size_t mine = r * op.count;
        std::copy(whole.begin() + mine, whole.begin() + mine + op.count, got.begin());
        // The other chunks of an in-place reduce-scatter's input are left alone.
        for (size_t i = 0; i < b.whole_elems; ++i) {
          if (i >= mine && i < mine + op.count) continue;
          ASSERT_EQ(whole[i], d.in[r][i]) << "input value " << i << " overwritten";
        }
      } else {
        std::copy(whole.begin(), whole.end(), got.begin());
      }
      got.resize(OutElems(op, ws));
      EXPECT_EQ(FirstDifference(got, d.want[r]), "") << "vs the reference";
    }
  }

  // One op on every rank, eagerly, checked.
  void RunAndCheck(const Op& op, uint64_t seed) {
    const WorkFormat f = format();
    const std::string where = OpName(op, f);
    SCOPED_TRACE(where);
    auto b = MakeBuffers(op);
    ASSERT_NE(b, nullptr);
    const OpData d = MakeData(op, f, seed);
    Upload(op, *b, d, /*async=*/false);
    ASSERT_OK(group_->LaunchAll(CallOf(op, f), b->in, b->out));
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < group_->world_size(); ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone);
    Check(op, *b, d, where);
  }

  std::vector<Codec> Codecs() const {
    std::vector<Codec> codecs;
    for (Codec c : kAllCodecs) {
      if (CodecRunsAtWorldSize(c, group_->world_size())) codecs.push_back(c);
    }
    return codecs;
  }

  std::unique_ptr<LocalGroup> group_;
};

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

// The same kinds captured into one graph per rank and replayed: new inputs
// (stream-ordered copies) before every replay, every output checked.
TEST_P(CollectivesGpuTest, GraphOfAllKindsReplayedStaysCorrect) {
  const int ws = group_->world_size();
  const WorkFormat f = format();
  const size_t s = static_cast<size_t>(ShardElems(ws));
  const std::vector<Op> ops = {
      {Collective::kReduceScatter, Codec::kInt4, 2 * s + 8, false, Algorithm::kTwoShot},
      {Collective::kAllGather, Codec::kFp, 2 * s + 8, true, Algorithm::kTwoShot},
      {Collective::kAllReduce, Codec::kInt8, ws * s, false, Algorithm::kTwoShot},
      {Collective::kReduceScatter, Codec::kFp, 64, true, Algorithm::kTwoShot},
  };
  std::vector<std::unique_ptr<OpBuffers>> bufs;
  for (const Op& op : ops) {
    bufs.push_back(MakeBuffers(op));
    ASSERT_NE(bufs.back(), nullptr);
  }
  // Data sets prepared up front; replay k uses set k % 3.
  std::vector<std::vector<OpData>> sets(3);
  for (int k = 0; k < 3; ++k) {
    for (size_t i = 0; i < ops.size(); ++i)
      sets[k].push_back(MakeData(ops[i], f, 500 + 10 * k + i));
  }
  // Each op once eagerly first, as a caller warms up before capturing: the
  // first launch of a kernel asks the runtime for its resident blocks.
  for (size_t i = 0; i < ops.size(); ++i) {
    Upload(ops[i], *bufs[i], sets[0][i], /*async=*/false);
    ASSERT_OK(group_->LaunchAll(CallOf(ops[i], f), bufs[i]->in, bufs[i]->out));
    ASSERT_OK(group_->Synchronize());
    Check(ops[i], *bufs[i], sets[0][i], "eager " + OpName(ops[i], f));
    if (HasFatalFailure()) return;
  }
  std::vector<gpu::GraphExec> graphs(ws, nullptr);
  for (int r = 0; r < ws; ++r) {
    ASSERT_OK(gpu::SetDevice(group_->device(r)));
    ASSERT_OK(gpu::BeginCapture(group_->stream(r)));
    for (size_t i = 0; i < ops.size(); ++i) {
      ASSERT_OK(group_->Launch(r, CallOf(ops[i], f), bufs[i]->in[r], bufs[i]->out[r]));
    }
    ASSERT_OK_AND_ASSIGN(graphs[r], gpu::EndCapture(group_->stream(r)));
  }
  for (int rep = 0; rep < 30; ++rep) {
    const std::vector<OpData>& set = sets[rep % 3];
    for (size_t i = 0; i < ops.size(); ++i) Upload(ops[i], *bufs[i], set[i], /*async=*/true);
    for (int r = 0; r < ws; ++r) {
      ASSERT_OK(gpu::SetDevice(group_->device(r)));
      ASSERT_OK(gpu::GraphLaunch(graphs[r], group_->stream(r)));
    }
    ASSERT_OK(group_->Synchronize());
    for (int r = 0; r < ws; ++r) ASSERT_EQ(group_->error(r), kGpuErrorNone) << "replay " << rep;
    for (size_t i = 0; i < ops.size(); ++i) {
      Check(ops[i], *bufs[i], set[i], "replay " + std::to_string(rep) + " " + OpName(ops[i], f));
      if (HasFatalFailure()) break;
    }
    if (HasFatalFailure()) break;
  }
  for (int r = 0; r < ws; ++r) {
    ASSERT_OK(gpu::SetDevice(group_->device(r)));
    gpu::GraphDestroy(graphs[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizesAndFormats, CollectivesGpuTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(WorkFormat::kFp16, WorkFormat::kBf16,
                                                              WorkFormat::kBf16Cast)),
                         [](const ::testing::TestParamInfo<std::tuple<int, WorkFormat>>& info) {
                           return "ws" + std::to_string(std::get<0>(info.param)) + "_" +
                                  WorkFormatName(std::get<1>(info.param));
                         });

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

// Polls until rank's stream is idle or `limit` passes; returns the time taken.
double DrainSeconds(LocalGroup& g, int rank, double limit) {
  const auto start = std::chrono::steady_clock::now();
  (void)gpu::SetDevice(g.device(rank));
  for (;;) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto done = gpu::StreamDone(g.stream(rank));
    if ((done.ok() && *done) || s > limit) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

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
}  // namespace qr::kernels
