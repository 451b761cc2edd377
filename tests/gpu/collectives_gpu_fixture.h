// The fixture of collectives_gpu_test's files (collectives_gpu_test.cc, the
// phase kernels; collectives_one_shot_gpu_test.cc, the one-shot forms): every
// rank of a LocalGroup driven from one process, each op's buffers poisoned
// around the values, inputs from tests/gpu/test_data.h, every output compared
// with the host reference bit for bit.
#ifndef QR_TESTS_GPU_COLLECTIVES_GPU_FIXTURE_H_
#define QR_TESTS_GPU_COLLECTIVES_GPU_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
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
#include "tests/gpu/local_group_test_util.h"
#include "tests/gpu/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels::collectives_gpu {

using ::qr::testing::FirstDifference;

constexpr uint16_t kPoison = 0xA5A5;

// One call of one kind, as every rank issues it.
struct Op {
  Collective kind = Collective::kReduceScatter;
  Codec codec = Codec::kFp;
  size_t count = 0;  // per rank
  bool in_place = false;
  Algorithm algorithm = Algorithm::kTwoShot;
};

inline std::string OpName(const Op& op, WorkFormat format) {
  const char* kind = op.kind == Collective::kReduceScatter ? "reduce-scatter"
                     : op.kind == Collective::kAllGather   ? "all-gather"
                                                           : "all-reduce";
  return std::string(kind) + " " + CodecName(op.codec) + " " + WorkFormatName(format) +
         " count=" + std::to_string(op.count) + (op.in_place ? " in-place" : "") +
         (op.algorithm == Algorithm::kOneShot ? " one-shot" : "");
}

// Values of a rank's input and output buffers.
inline size_t InElems(const Op& op, int ws) {
  return op.kind == Collective::kReduceScatter ? ws * op.count : op.count;
}
inline size_t OutElems(const Op& op, int ws) {
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
    return AllocFilled(group_->device(rank), (elems + 8) * 2, 0xA5, keep);
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
    }
    ComputeWant(op, f, &d);
    return d;
  }

  // d->want: the reference's outputs of `op` for the inputs d->in.
  void ComputeWant(const Op& op, WorkFormat f, OpData* d) {
    const int ws = group_->world_size();
    d->want.assign(ws, std::vector<uint16_t>(OutElems(op, ws)));
    std::vector<const uint16_t*> ins;
    std::vector<uint16_t*> outs;
    for (int r = 0; r < ws; ++r) {
      ins.push_back(d->in[r].data());
      outs.push_back(d->want[r].data());
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

  // `ops` captured into one graph per rank and replayed `reps` times: new
  // inputs (stream-ordered copies) before every replay, every output checked.
  void ReplayGraphOf(const std::vector<Op>& ops, int reps) {
    const int ws = group_->world_size();
    const WorkFormat f = format();
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
    for (int rep = 0; rep < reps; ++rep) {
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

  std::vector<Codec> Codecs() const {
    std::vector<Codec> codecs;
    for (Codec c : kAllCodecs) {
      if (CodecRunsAtWorldSize(c, group_->world_size())) codecs.push_back(c);
    }
    return codecs;
  }

  std::unique_ptr<LocalGroup> group_;
};

}  // namespace qr::kernels::collectives_gpu

#endif  // QR_TESTS_GPU_COLLECTIVES_GPU_FIXTURE_H_
