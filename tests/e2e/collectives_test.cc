// Reduce-scatter and all-gather end to end on the host backend: real
// processes joined through a real broker run sweeps of both (every codec
// legal at the world size, fp16 / bf16 / bf16 cast, sizes from one 16-byte
// unit to more tiles than a round holds, in place and not), interleaved with
// all-reduces, each output bit-identical to ReferenceReduceScatter /
// ReferenceAllGather of the algorithm the policy picks; all-gather outputs
// the same on every rank. Invalid arguments fail before anything runs; a
// rank that aborts fails its peers' collectives.
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/policy.h"
#include "common/status_macros.h"
#include "kernels/all_gather_reference.h"
#include "kernels/geometry.h"
#include "kernels/reduce_scatter_reference.h"
#include "tests/e2e/harness.h"
#include "tests/util/status_matchers.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

namespace k = ::qr::kernels;
using std::chrono::milliseconds;

JoinOptions OptionsOf(const WorkerArgs& a) {
  JoinOptions o;
  o.group = a.group();
  o.rank = a.rank();
  o.world_size = a.world_size();
  o.timeout_ms = 30000;
  return o;
}

struct Call {
  Collective collective;
  Codec codec;
  DType dtype;
  bool cast;
  bool in_place;
  int64_t count;  // per rank
  uint64_t seed;
};

std::string Describe(const Call& c) {
  return std::string(c.collective == Collective::kReduceScatter ? "reduce_scatter" : "all_gather") +
         " " + CodecName(c.codec) + " " + DTypeName(c.dtype) + (c.cast ? " cast" : "") +
         (c.in_place ? " in place" : "") + " n=" + std::to_string(c.count);
}

std::vector<Call> SweepCalls(int ws, bool big) {
  std::vector<Call> calls;
  const int64_t se = k::ShardElems(ws);
  std::vector<int64_t> sizes = {8, 24, se + 8, 3 * se - 24};
  uint64_t seed = 1;
  for (Codec codec : kAllCodecs) {
    if (!CodecRunsAtWorldSize(codec, ws)) continue;
    for (int mode = 0; mode < 3; ++mode) {
      const DType dtype = mode == 0 ? DType::kFloat16 : DType::kBFloat16;
      std::vector<int64_t> counts = sizes;
      // More tiles than one round's slots (comm/host_backend.h kHostSlots).
      if (big && mode == 2) counts.push_back(65 * se + 40);
      for (int64_t n : counts) {
        for (Collective coll : {Collective::kReduceScatter, Collective::kAllGather}) {
          calls.push_back({coll, codec, dtype, mode == 2, (seed % 2) == 0, n, seed});
          ++seed;
        }
      }
    }
  }
  return calls;
}

Regime RegimeOf(Codec codec) { return static_cast<Regime>(static_cast<int>(codec)); }

// Rank r's input of a call: the whole message for reduce-scatter, the
// per-rank values for all-gather.
std::vector<uint16_t> InputOf(const Call& c, int ws, int rank) {
  const int64_t n = c.collective == Collective::kReduceScatter ? ws * c.count : c.count;
  std::vector<uint16_t> v(static_cast<size_t>(n));
  demo::FillInput(c.dtype, rank, c.seed, n, v.data());
  return v;
}

// This rank's expected output, from every rank's input through the
// reference of the algorithm the policy picks.
std::vector<uint16_t> Expected(const Call& c, const Config& config, int ws, int rank) {
  std::vector<std::vector<uint16_t>> in;
  std::vector<const uint16_t*> ins;
  for (int r = 0; r < ws; ++r) in.push_back(InputOf(c, ws, r));
  for (auto& v : in) ins.push_back(v.data());
  k::TwoShotParams p;
  p.world_size = ws;
  p.codec = c.codec;
  p.dtype = c.dtype;
  p.cast_bf16_to_fp16 = c.cast;
  p.num_elems = c.count;
  const Algorithm algorithm = ChooseAlgorithm(config, static_cast<size_t>(ws * c.count * 2), ws,
                                              WorkFormatOf(c.dtype, c.cast), c.codec);
  const bool rs = c.collective == Collective::kReduceScatter;
  std::vector<std::vector<uint16_t>> out(ws, std::vector<uint16_t>(rs ? c.count : ws * c.count));
  std::vector<uint16_t*> outs;
  for (auto& v : out) outs.push_back(v.data());
  Status s =
      rs ? k::ReferenceReduceScatter(k::ReduceScatterParamsFor(p, algorithm), ins.data(),
                                     outs.data())
         : k::ReferenceAllGather(k::AllGatherParamsFor(p, algorithm), ins.data(), outs.data());
  if (!s.ok()) std::fprintf(stderr, "reference: %s\n", s.ToString().c_str());
  return out[rank];
}

// Runs one call on `comm`; returns this rank's output.
Status RunCall(Communicator& comm, const Call& c, std::vector<uint16_t>* result) {
  const int ws = comm.world_size();
  const int rank = comm.rank();
  std::vector<uint16_t> in = InputOf(c, ws, rank);
  const bool rs = c.collective == Collective::kReduceScatter;
  if (rs) {
    if (c.in_place) {
      QR_RETURN_IF_ERROR(comm.ReduceScatter(in.data(), in.data() + rank * c.count, c.count, c.dtype,
                                            RegimeOf(c.codec), c.cast));
      result->assign(in.begin() + rank * c.count, in.begin() + (rank + 1) * c.count);
      return OkStatus();
    }
    result->assign(c.count, 0xDEAD);
    return comm.ReduceScatter(in.data(), result->data(), c.count, c.dtype, RegimeOf(c.codec),
                              c.cast);
  }
  result->assign(ws * c.count, 0xDEAD);
  if (c.in_place) {
    std::copy(in.begin(), in.end(), result->begin() + rank * c.count);
    return comm.AllGather(result->data() + rank * c.count, result->data(), c.count, c.dtype,
                          RegimeOf(c.codec), c.cast);
  }
  return comm.AllGather(in.data(), result->data(), c.count, c.dtype, RegimeOf(c.codec), c.cast);
}

int SweepWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto comm = JoinWithRetry(OptionsOf(a), milliseconds(30000));
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: join: %s\n", rank, comm.status().ToString().c_str());
    return 10;
  }
  const std::vector<Call> calls = SweepCalls(ws, a.GetInt("big", 0) != 0);
  std::string fingerprints;
  int index = 0;
  for (const Call& c : calls) {
    std::vector<uint16_t> out;
    Status s = RunCall(**comm, c, &out);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, Describe(c).c_str(), s.ToString().c_str());
      return 11;
    }
    const std::vector<uint16_t> want = Expected(c, (*comm)->config(), ws, rank);
    if (out != want) {
      size_t i = 0;
      while (i < out.size() && out[i] == want[i]) ++i;
      std::fprintf(stderr, "rank %d: %s: value %zu is %04x, the reference's %04x\n", rank,
                   Describe(c).c_str(), i, out[i], want[i]);
      return 12;
    }
    if (c.collective == Collective::kAllGather) {
      char line[96];
      std::snprintf(line, sizeof(line), "call %d %016" PRIx64 "\n", index,
                    Fingerprint(out.data(), out.size() * 2));
      fingerprints += line;
    }
    // An all-reduce between collectives: the rounds and flags of all three
    // kinds interleave.
    if (index % 3 == 0) {
      std::vector<uint16_t> x(static_cast<size_t>(k::kTileElems + 8), 0x3C00);
      s = (*comm)->AllReduce(x.data(), x.data(), x.size(), DType::kFloat16, Regime::kFp, false);
      if (!s.ok() || x[0] != (ws == 2 ? 0x4000 : ws == 4 ? 0x4400 : 0x4800)) {
        std::fprintf(stderr, "rank %d: interleaved all-reduce: %s %04x\n", rank,
                     s.ToString().c_str(), x[0]);
        return 13;
      }
    }
    ++index;
  }
  if (!WriteFile(FingerprintPath(a), fingerprints)) return 14;
  return (*comm)->Leave().ok() ? 0 : 15;
}

// Every invalid argument is QR_INVALID_ARGUMENT (kUnsupported for NONE and
// INT3 beyond world size 2) before anything runs: the group stays usable,
// which the final correct call proves.
int InvalidWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto comm = JoinWithRetry(OptionsOf(a), milliseconds(30000));
  if (!comm.ok()) return 10;
  Communicator& c = **comm;
  alignas(16) static uint16_t buf[8 * 64];
  const Regime fp = Regime::kFp;
  const DType f16 = DType::kFloat16;
  struct Expect {
    const char* what;
    Status s;
    StatusCode code;
  };
  const size_t n = 16;
  std::vector<Expect> checks = {
      {"rs null in", c.ReduceScatter(nullptr, buf, n, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"ag null out", c.AllGather(buf, nullptr, n, f16, fp, false), StatusCode::kInvalidArgument},
      {"rs shard of 12 bytes", c.ReduceScatter(buf, buf + 256, 6, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"ag shard of 24 bytes", c.AllGather(buf, buf + 256, 12, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"rs misaligned out", c.ReduceScatter(buf, buf + 257, n, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"ag misaligned in", c.AllGather(buf + 1, buf + 256, n, f16, fp, false),
       StatusCode::kInvalidArgument},
      // out inside in, but not at this rank's slice.
      {"rs overlap", c.ReduceScatter(buf, buf + ((rank + 1) % ws) * n, n, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"ag overlap", c.AllGather(buf + ((rank + 1) % ws) * n, buf, n, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"ag in == out (not rank 0's slice)",
       rank == 0 ? InvalidArgumentError("skipped") : c.AllGather(buf, buf, n, f16, fp, false),
       StatusCode::kInvalidArgument},
      {"rs regime NONE", c.ReduceScatter(buf, buf + 256, n, f16, Regime::kNone, false),
       StatusCode::kUnsupported},
      {"rs bad dtype", c.ReduceScatter(buf, buf + 256, n, static_cast<DType>(7), fp, false),
       StatusCode::kInvalidArgument},
      {"ag above the maximum", c.AllGather(buf, buf + 256, (size_t{3} << 30) / ws, f16, fp, false),
       StatusCode::kInvalidArgument},
  };
  if (ws != 2) {
    checks.push_back({"ag INT3", c.AllGather(buf, buf + 256, n, f16, Regime::kInt3, false),
                      StatusCode::kUnsupported});
  }
  int failures = 0;
  for (const Expect& e : checks) {
    if (e.s.code() != e.code) {
      std::fprintf(stderr, "rank %d: %s: got %s\n", rank, e.what, e.s.ToString().c_str());
      ++failures;
    }
  }
  if (!c.ReduceScatter(buf, buf + 256, 0, f16, fp, false).ok()) ++failures;  // count 0: no-op
  // The group still works: one in-place all-gather of ones.
  for (int i = 0; i < ws * 8; ++i) buf[i] = 0;
  for (int i = 0; i < 8; ++i) buf[rank * 8 + i] = static_cast<uint16_t>(0x3C00 + rank);
  Status s = c.AllGather(buf + rank * 8, buf, 8, f16, fp, false);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: all-gather after the refusals: %s\n", rank,
                 s.ToString().c_str());
    return 11;
  }
  for (int q = 0; q < ws; ++q) {
    if (buf[q * 8 + 7] != 0x3C00 + q) ++failures;
  }
  return failures == 0 && c.Leave().ok() ? 0 : 12;
}

// Rank 0 aborts; the others' next reduce-scatter fails with kPeerFailed
// instead of waiting out QR_OP_TIMEOUT_MS.
int AbortWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto comm = JoinWithRetry(OptionsOf(a), milliseconds(30000));
  if (!comm.ok()) return 10;
  std::vector<uint16_t> in(static_cast<size_t>(ws * k::kTileElems), 0x3C00);
  std::vector<uint16_t> out(static_cast<size_t>(k::kTileElems));
  // One collective first, so that rank 0 aborts only once every rank has
  // joined: a join returns when the peers have mapped this rank's buffers,
  // not when they have mapped each other's, and a peer still connecting
  // when the abort comes fails its join instead of its call. The call may
  // itself meet the abort on the ranks still in it.
  std::vector<uint16_t> gathered(static_cast<size_t>(ws) * 64);
  Status barrier =
      (*comm)->AllGather(in.data(), gathered.data(), 64, DType::kFloat16, Regime::kFp, false);
  if (!barrier.ok() && barrier.code() != StatusCode::kPeerFailed) return 15;
  if (rank == 0) {
    if (!barrier.ok()) return 16;
    if (!(*comm)->Abort("test abort").ok()) return 11;
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  Status s = (*comm)->ReduceScatter(in.data(), out.data(), out.size(), DType::kFloat16,
                                    Regime::kInt8, false);
  const auto waited = std::chrono::steady_clock::now() - start;
  if (s.code() != StatusCode::kPeerFailed) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 12;
  }
  if (waited > std::chrono::seconds(10)) return 13;
  // Sticky: the all-gather fails the same way.
  s = (*comm)->AllGather(out.data(), in.data(), out.size(), DType::kFloat16, Regime::kFp, false);
  return s.code() == StatusCode::kPeerFailed ? 0 : 14;
}

// Rank 0 reduce-scatters while the others all-gather the same size: every
// rank fails with kPeerFailed naming the mismatch, nobody hangs or mixes data.
int MismatchWorker(const WorkerArgs& a) {
  const int rank = a.rank();
  const int ws = a.world_size();
  auto comm = JoinWithRetry(OptionsOf(a), milliseconds(30000));
  if (!comm.ok()) return 10;
  std::vector<uint16_t> big(static_cast<size_t>(ws * 64), 0x3C00);
  std::vector<uint16_t> small(64, 0x3C00);
  // One collective every rank runs first (as AbortWorker does): a join
  // returns once the peers have mapped this rank's buffers, not each
  // other's, so rank 0 could see the mismatch, fail and leave while a peer
  // was still joining; that peer's join then failed and its retry waited
  // for rank 0 forever (seen at ws 8 in CI's fresh-Debian step).
  Status barrier =
      (*comm)->AllGather(small.data(), big.data(), 64, DType::kFloat16, Regime::kFp, false);
  if (!barrier.ok()) {
    std::fprintf(stderr, "rank %d: first all-gather: %s\n", rank, barrier.ToString().c_str());
    return 12;
  }
  // Two-shot, so both kinds go through the flags that carry the description.
  Status s = rank == 0 ? (*comm)->ReduceScatter(big.data(), small.data(), 64, DType::kFloat16,
                                                Regime::kFp, false)
                       : (*comm)->AllGather(small.data(), big.data(), 64, DType::kFloat16,
                                            Regime::kFp, false);
  if (s.code() != StatusCode::kPeerFailed) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 11;
  }
  return 0;
}

class CollectivesTest : public E2eTest, public ::testing::WithParamInterface<int> {};

TEST_P(CollectivesTest, TwoShotSweepMatchesTheReferenceOnEveryRank) {
  const int ws = GetParam();
  const std::string group = UniqueGroup("rsag" + std::to_string(ws));
  // Every call two-shot, so every codec really quantizes.
  std::vector<int> codes = WaitAll(
      SpawnWorkers("sweep", group, ws, {{"big", ws == 2 ? "1" : "0"}}, {"QR_ONE_SHOT_MAX_KB=0"}),
      std::chrono::seconds(400));
  for (int r = 0; r < ws; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  ExpectSameOutputsOnEveryRank(group, ws);
}

TEST_P(CollectivesTest, DefaultCeilingRunsSmallCallsExact) {
  const int ws = GetParam();
  RunWorkers("sweep", ws, {{"big", "0"}});
}

TEST_P(CollectivesTest, InvalidArgumentsFailBeforeAnythingRuns) {
  RunWorkers("invalid", GetParam());
}

TEST_P(CollectivesTest, AbortFailsThePeersCollectives) { RunWorkers("abort", GetParam()); }

TEST_P(CollectivesTest, RanksCallingDifferentCollectivesFailTheGroup) {
  const int ws = GetParam();
  const std::string group = UniqueGroup("rsagmix" + std::to_string(ws));
  std::vector<int> codes = WaitAll(
      SpawnWorkers("mismatch", group, ws, {}, {"QR_ONE_SHOT_MAX_KB=0", "QR_OP_TIMEOUT_MS=20000"}),
      std::chrono::seconds(60));
  for (int r = 0; r < ws; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Values(2, 4, 8),
                         [](const auto& info) { return "ws" + std::to_string(info.param); });

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv,
                              {{"sweep", &qr::testing::SweepWorker},
                               {"invalid", &qr::testing::InvalidWorker},
                               {"abort", &qr::testing::AbortWorker},
                               {"mismatch", &qr::testing::MismatchWorker}});
}
