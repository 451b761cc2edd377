// The fused all-reduce + residual add + RMSNorm (docs/fused.md) across real
// processes on the host backend, world sizes 2, 4, 8: every regime, fp16 /
// bf16 / bf16 with the cast, one-shot and two-shot (as the policy picks at
// the built-in ceilings, and two-shot only with QR_ONE_SHOT_MAX_KB=0), the
// in-place layouts of the contract and no residual, half the cases with
// the FP8 output (scales that saturate and that reach e4m3's subnormals). Each rank compares its
// outputs with the host reference (kernels/rmsnorm_reference.h) bit for
// bit, and the driver compares every rank's fingerprints. Invalid arguments
// fail before anything runs (the group stays usable); a rank that aborts
// fails its peer's fused call with kPeerFailed.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/policy.h"
#include "kernels/rmsnorm_reference.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

JoinOptions OptionsOf(const WorkerArgs& a) {
  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = a.world_size();
  o.timeout_ms = 60000;
  return o;
}

struct FusedCase {
  Codec codec;
  DType dtype;
  bool cast;
  int64_t tokens, hidden;
  int layout;  // 0 separate, 1 residual in place, 2 residual_out = in, 3 vLLM's, 4 no residual
  uint64_t seed;
  float fp8_scale;  // 0: no FP8 output
};

std::vector<FusedCase> Cases(int ws) {
  std::vector<FusedCase> cases;
  const int64_t shapes[][2] = {{1, 4096}, {3, 8}, {7, 1032}, {40, 8192}};
  for (Codec codec : kAllCodecs) {
    if (!CodecRunsAtWorldSize(codec, ws)) continue;
    for (int d = 0; d < 3; ++d) {
      for (const auto& shape : shapes) {
        const int i = static_cast<int>(cases.size());
        const float scales[] = {0, 0.25f, 0, 1.0f / 256, 0, 4.0f};
        cases.push_back({codec, d == 0 ? DType::kFloat16 : DType::kBFloat16, d == 2, shape[0],
                         shape[1], i % 5, 500 + static_cast<uint64_t>(i), scales[i % 6]});
      }
    }
  }
  return cases;
}

// The group's inputs: rank r's partial sums, the residual (the same on every
// rank, as in tensor parallelism) and the weight.
std::vector<uint16_t> Data(const FusedCase& c, int who, int64_t n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  demo::FillInput(c.dtype, who, c.seed, n, v.data());
  return v;
}

// Runs one case as rank `me`; fills *ro / *no / *q with this rank's
// outputs (*q empty without the FP8 output).
Status RunFused(Communicator& comm, const FusedCase& c, std::vector<uint16_t>* ro,
                std::vector<uint16_t>* no, std::vector<uint8_t>* q) {
  const int64_t n = c.tokens * c.hidden;
  std::vector<uint16_t> in = Data(c, comm.rank(), n);
  std::vector<uint16_t> residual = Data(c, 100, n), weight = Data(c, 101, c.hidden);
  ro->assign(static_cast<size_t>(n), 0x1111);
  no->assign(static_cast<size_t>(n), 0x2222);
  void* residual_out = c.layout == 1 || c.layout == 3 ? residual.data()
                       : c.layout == 2                ? in.data()
                                                      : ro->data();
  void* norm_out = c.layout == 3 ? in.data() : no->data();
  const void* res = c.layout == 4 ? nullptr : residual.data();
  q->assign(c.fp8_scale != 0 ? static_cast<size_t>(n) : 0, 0x55);
  Status s =
      c.fp8_scale != 0
          ? comm.AllReduceResidualRmsNormFp8(in.data(), res, weight.data(), residual_out, norm_out,
                                             q->data(), &c.fp8_scale, c.tokens, c.hidden, 1e-5f,
                                             c.dtype, static_cast<Regime>(c.codec), c.cast)
          : comm.AllReduceResidualRmsNorm(in.data(), res, weight.data(), residual_out, norm_out,
                                          c.tokens, c.hidden, 1e-5f, c.dtype,
                                          static_cast<Regime>(c.codec), c.cast);
  const auto* r = static_cast<const uint16_t*>(residual_out);
  const auto* o = static_cast<const uint16_t*>(norm_out);
  ro->assign(r, r + n);
  no->assign(o, o + n);
  return s;
}

// The reference of the same call for the whole group.
bool Verify(const Config& config, const FusedCase& c, int ws, const std::vector<uint16_t>& ro,
            const std::vector<uint16_t>& no, const std::vector<uint8_t>& q) {
  const int64_t n = c.tokens * c.hidden;
  kernels::TwoShotParams p;
  p.world_size = ws;
  p.codec = c.codec;
  p.dtype = c.dtype;
  p.cast_bf16_to_fp16 = c.cast && c.dtype == DType::kBFloat16;
  p.num_elems = n;
  const Algorithm algorithm = ChooseAlgorithm(config, static_cast<size_t>(n) * 2, ws,
                                              WorkFormatOf(p.dtype, p.cast_bf16_to_fp16), p.codec);
  std::vector<std::vector<uint16_t>> in(ws), want_ro(ws, std::vector<uint16_t>(n)),
      want_no(ws, std::vector<uint16_t>(n));
  std::vector<std::vector<uint8_t>> want_q(ws, std::vector<uint8_t>(c.fp8_scale != 0 ? n : 0));
  const std::vector<uint16_t> residual = Data(c, 100, n), weight = Data(c, 101, c.hidden);
  std::vector<const uint16_t*> ins, res;
  std::vector<uint16_t*> ros, nos;
  std::vector<uint8_t*> qs;
  for (int r = 0; r < ws; ++r) {
    qs.push_back(want_q[r].data());
    in[r] = Data(c, r, n);
    ins.push_back(in[r].data());
    res.push_back(c.layout == 4 ? nullptr : residual.data());
    ros.push_back(want_ro[r].data());
    nos.push_back(want_no[r].data());
  }
  Status s = kernels::ReferenceAllReduceResidualRmsNorm(
      p, algorithm, c.tokens, c.hidden, 1e-5f, ins.data(), res.data(), weight.data(), ros.data(),
      nos.data(), c.fp8_scale != 0 ? qs.data() : nullptr, c.fp8_scale);
  return s.ok() && ro == want_ro[0] && no == want_no[0] && q == want_q[0];
}

int FusedWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) return 2;
  const int ws = a.world_size();
  std::string fingerprints;
  int failures = 0, index = 0;
  for (const FusedCase& c : Cases(ws)) {
    std::vector<uint16_t> ro, no;
    std::vector<uint8_t> q;
    Status s = RunFused(**comm, c, &ro, &no, &q);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d case %d: %s\n", a.rank(), index, s.ToString().c_str());
      return 3;
    }
    char line[128];
    std::snprintf(line, sizeof(line), "%d %016" PRIx64 " %016" PRIx64 " %016" PRIx64 "\n", index,
                  Fingerprint(ro.data(), ro.size() * 2), Fingerprint(no.data(), no.size() * 2),
                  Fingerprint(q.data(), q.size()));
    fingerprints += line;
    // Each rank checks its share of the cases (the driver compares all).
    if (index % ws == a.rank() && !Verify((*comm)->config(), c, ws, ro, no, q)) {
      std::fprintf(stderr,
                   "rank %d: case %d (%s %s%s %" PRId64 "x%" PRId64
                   " layout %d fp8 scale %g) differs from the reference\n",
                   a.rank(), index, CodecName(c.codec), DTypeName(c.dtype), c.cast ? " cast" : "",
                   c.tokens, c.hidden, c.layout, static_cast<double>(c.fp8_scale));
      ++failures;
    }
    ++index;
  }
  if (!WriteFile(FingerprintPath(a), fingerprints)) return 4;
  if (!(*comm)->Leave().ok()) return 5;
  return failures == 0 ? 0 : 1;
}

// Bad arguments are refused on every rank before anything runs; a valid call
// afterwards still works (no rank went ahead alone).
int InvalidWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) return 2;
  Communicator& c = **comm;
  alignas(16) uint16_t in[64] = {}, res[64] = {}, w[16] = {}, ro[64] = {}, no[64] = {};
  alignas(16) uint8_t q[64] = {};
  const float scale = 1.0f;
  const DType f16 = DType::kFloat16;
  const Regime fp = Regime::kFp;
  const Status bad[] = {
      c.AllReduceResidualRmsNorm(in, res, w, no, no, 4, 16, 1e-6f, f16, fp, false),
      c.AllReduceResidualRmsNorm(in, res, w, ro, res, 4, 16, 1e-6f, f16, fp, false),
      c.AllReduceResidualRmsNorm(in, res, w, ro, no, 16, 4, 1e-6f, f16, fp, false),
      c.AllReduceResidualRmsNorm(in, res, nullptr, ro, no, 4, 16, 1e-6f, f16, fp, false),
      c.AllReduceResidualRmsNorm(in + 1, res, w, ro, no, 1, 56, 1e-6f, f16, fp, false),
      c.AllReduceResidualRmsNorm(in, res, w, ro, no, 4, 16, 1e-6f, static_cast<DType>(7), fp,
                                 false),
      c.AllReduceResidualRmsNormFp8(in, res, w, ro, no, q, nullptr, 4, 16, 1e-6f, f16, fp, false),
      c.AllReduceResidualRmsNormFp8(in, res, w, ro, no, nullptr, &scale, 4, 16, 1e-6f, f16, fp,
                                    false),
      c.AllReduceResidualRmsNormFp8(in, res, w, ro, no, no, &scale, 4, 16, 1e-6f, f16, fp, false),
  };
  for (const Status& s : bad) {
    if (s.code() != StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "rank %d: want INVALID_ARGUMENT, got %s\n", a.rank(),
                   s.ToString().c_str());
      return 3;
    }
  }
  if (c.AllReduceResidualRmsNorm(in, res, w, ro, no, 4, 16, 1e-6f, f16, Regime::kNone, false)
          .code() != StatusCode::kUnsupported) {
    return 4;
  }
  if (!c.AllReduceResidualRmsNorm(in, res, w, ro, no, 0, 16, 1e-6f, f16, fp, false).ok()) return 5;
  if (!c.AllReduceResidualRmsNorm(in, res, w, ro, no, 4, 16, 1e-6f, f16, fp, false).ok()) return 6;
  return c.Leave().ok() ? 0 : 7;
}

// Rank 1 aborts the group; rank 0's fused call fails with kPeerFailed.
int PeerFailureWorker(const WorkerArgs& a) {
  auto comm = Communicator::Join(OptionsOf(a));
  if (!comm.ok()) return 2;
  // One all-reduce together first: a join returns once the peer has mapped
  // this rank's buffers, so an abort right after it could fail the peer's
  // join instead of its call (the race collectives_test met at ws 8).
  std::vector<uint16_t> first(64, 0x3C00);
  if (!(*comm)
           ->AllReduce(first.data(), first.data(), first.size(), DType::kFloat16, Regime::kFp,
                       false)
           .ok()) {
    return 6;
  }
  if (a.rank() == 1) {
    if (!(*comm)->Abort("rank 1 gives up").ok()) return 3;
    return (*comm)->Leave().ok() ? 0 : 4;
  }
  std::vector<uint16_t> in(4096, 0x3C00), res(4096, 0x3C00), w(512, 0x3C00), ro(4096), no(4096);
  const Status s =
      (*comm)->AllReduceResidualRmsNorm(in.data(), res.data(), w.data(), ro.data(), no.data(), 8,
                                        512, 1e-6f, DType::kFloat16, Regime::kFp, false);
  if (s.code() != StatusCode::kPeerFailed) {
    std::fprintf(stderr, "rank 0: want PEER_FAILED, got %s\n", s.ToString().c_str());
    return 5;
  }
  (*comm)->Leave().IgnoreError();
  return 0;
}

class FusedTest : public E2eTest {
 protected:
  void RunSweep(int ws, const std::vector<std::string>& env) {
    const std::string group = UniqueGroup("fused" + std::to_string(ws));
    std::vector<int> codes =
        WaitAll(SpawnWorkers("fused", group, ws, {}, env), std::chrono::seconds(280));
    for (int r = 0; r < ws; ++r) ASSERT_EQ(codes[r], 0) << "rank " << r;
    const std::string first = ExpectSameOutputsOnEveryRank(group, ws);
    EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), static_cast<long>(Cases(ws).size()));
  }
};

TEST_F(FusedTest, WorldSize2) { RunSweep(2, {}); }
TEST_F(FusedTest, WorldSize4) { RunSweep(4, {}); }
TEST_F(FusedTest, WorldSize8) { RunSweep(8, {}); }
TEST_F(FusedTest, WorldSize4TwoShotOnly) { RunSweep(4, {"QR_ONE_SHOT_MAX_KB=0"}); }
TEST_F(FusedTest, InvalidArgumentsFailBeforeAnythingRuns) { RunWorkers("invalid", 2); }
TEST_F(FusedTest, AbortedPeerFailsTheCall) { RunWorkers("peer-failure", 2); }

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv,
                              {{"fused", &qr::testing::FusedWorker},
                               {"invalid", &qr::testing::InvalidWorker},
                               {"peer-failure", &qr::testing::PeerFailureWorker}});
}
