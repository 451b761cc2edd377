#include "tools/bench_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "comm/config.h"
#include "comm/policy.h"
#include "nlohmann/json.hpp"
#include "tests/util/status_matchers.h"

namespace qr::bench {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

Measurement Meas(size_t bytes, BenchDType d, BenchAlgo a, Codec c, double us,
                 BenchMode mode = BenchMode::kGraph) {
  return {{bytes, d, mode, a, c}, us};
}

// Synthetic graph-mode timings at world size 2, chosen so that the derived
// table does not depend on where the policy puts the one-shot ceiling (at or
// below 1 MiB, all that the one-shot region holds at world size 2):
// fp16: one-shot and every two-shot lose to NCCL below 1536K; from there
//   FP wins except at 16M (floor 64), INT8 wins from 2M (floor 2), INT6 from
//   1536K (floor 1, rounded down), INT4 loses at the largest size (floor
//   65), INT3 not timed (built-in).
// bf16: one-shot and FP win everywhere (floor 0); other codecs not timed.
// One-shot beats two-shot FP for fp16 up to 256K, for bf16 up to 1M.
const size_t kSizes[] = {16 * K, 256 * K, M, 1536 * K, 2 * M, 16 * M, 64 * M};

double Nccl(size_t b) { return 10.0 + static_cast<double>(b) / 250e3; }

std::vector<Measurement> Synthetic() {
  std::vector<Measurement> m;
  for (size_t b : kSizes) {
    const double n = Nccl(b);
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kNccl, Codec::kFp, n));
    m.push_back(Meas(b, BenchDType::kBf16, BenchAlgo::kNccl, Codec::kFp, n));
    if (b <= M) {
      m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kOneShot, Codec::kFp, 1.2 * n));
      m.push_back(Meas(b, BenchDType::kBf16, BenchAlgo::kOneShot, Codec::kFp, 0.5 * n));
    }
    const double fp = b <= 256 * K ? 1.3 : b < 1536 * K ? 1.1 : b == 16 * M ? 1.05 : 0.8;
    const double int8 = b < 2 * M ? 1.1 : 0.7;
    const double int6 = b < 1536 * K ? 1.1 : 0.6;
    const double int4 = b == 64 * M ? 1.01 : 0.5;
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kFp, fp * n));
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kInt8, int8 * n));
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kInt6, int6 * n));
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kInt4, int4 * n));
    m.push_back(Meas(b, BenchDType::kBf16, BenchAlgo::kTwoShot, Codec::kFp, 0.9 * n));
    // Eager rows win everywhere: they must not move the (graph) table.
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kNccl, Codec::kFp, 5 * n, BenchMode::kEager));
    m.push_back(
        Meas(b, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kInt4, n, BenchMode::kEager));
  }
  return m;
}

// Unmeasured cells keep the built-in value: AMD's table has floors to keep.
constexpr Platform kAmd = Platform::kAmd;

// The policy the synthetic data is designed for: one-shot up to 1 MiB (the
// built-in ceilings change with measurements; these tests must not).
Config Policy() {
  Config c;
  c.one_shot_max_bytes = static_cast<int64_t>(M);
  return c;
}

const std::vector<Codec> kRegimes = {Codec::kFp, Codec::kInt8, Codec::kInt6, Codec::kInt4,
                                     Codec::kInt3};

TEST(BenchReportTest, WireBytesAndLinkLimit) {
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kTwoShot, Codec::kFp, 64 * M, 2), 64.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kTwoShot, Codec::kInt4, 64 * M, 2), 18.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kTwoShot, Codec::kInt8, 64 * M, 2), 34.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kTwoShot, Codec::kInt6, 64 * M, 2), 26.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kTwoShot, Codec::kInt3, 64 * M, 2), 14.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kTwoShot, Codec::kFp, 64 * M, 4), 96.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kOneShot, Codec::kInt4, M, 2), 1.0 * M);
  EXPECT_DOUBLE_EQ(WireBytesPerGpu(Algorithm::kOneShot, Codec::kFp, M, 8), 7.0 * M);
  // 64 MiB at 370 GB/s: 67108864 / 370e3 us.
  EXPECT_NEAR(LinkLimitUs(Algorithm::kTwoShot, Codec::kFp, 64 * M, 2, 370.0), 181.37, 0.01);
  EXPECT_EQ(LinkLimitUs(Algorithm::kTwoShot, Codec::kFp, 64 * M, 2, 0.0), 0.0);
  PeerBandwidth p;
  EXPECT_EQ(p.LinkGBps(), 0.0);
  p.concurrent_gbps = {368.0, 352.5};
  EXPECT_EQ(p.LinkGBps(), 352.5);
}

TEST(BenchReportTest, RowsCarryRatiosLinkLimitsAndThePolicyPick) {
  const auto rows = BuildRows(Synthetic(), kRegimes, 2, 300.0, Policy());
  const Config defaults = Policy();
  int policy_rows = 0;
  for (const BenchRow& r : rows) {
    if (r.mode != BenchMode::kGraph) continue;
    const double n = Nccl(r.bytes);
    EXPECT_DOUBLE_EQ(r.nccl_us, n);
    EXPECT_DOUBLE_EQ(r.ratio_vs_nccl, r.us / n);
    EXPECT_DOUBLE_EQ(r.algbw_gbps, r.bytes / r.us / 1e3);
    EXPECT_GT(r.link_limit_us, 0);
    EXPECT_DOUBLE_EQ(r.pct_of_link_limit, 100 * r.link_limit_us / r.us);
    if (r.algo != BenchAlgo::kPolicy) {
      EXPECT_TRUE(r.policy_choice.empty());
      continue;
    }
    ++policy_rows;
    const Codec codec =
        EffectiveCodec(defaults, static_cast<Regime>(*CodecFromName(r.regime)), r.bytes);
    const bool one = ChooseAlgorithm(defaults, r.bytes, 2, r.dtype, codec) == Algorithm::kOneShot;
    // INT3 two-shot was never timed: its pick is reported only where it is one-shot.
    if (r.regime == "INT3") {
      EXPECT_TRUE(one) << r.bytes;
    }
    EXPECT_EQ(r.policy_choice, one ? "one-shot" : "two-shot");
    // The policy row copies the timed row it picked.
    const auto picked = std::find_if(rows.begin(), rows.end(), [&](const BenchRow& x) {
      return x.bytes == r.bytes && x.dtype == r.dtype && x.mode == r.mode &&
             x.algo == (one ? BenchAlgo::kOneShot : BenchAlgo::kTwoShot) &&
             (one || x.regime == r.regime);
    });
    ASSERT_NE(picked, rows.end());
    EXPECT_EQ(picked->us, r.us);
    EXPECT_EQ(picked->link_limit_us, r.link_limit_us);
  }
  EXPECT_GT(policy_rows, 0);
  // 64M fp16 INT4 two-shot at 300 GB/s: 18 MiB on the wire.
  const auto int4 = std::find_if(rows.begin(), rows.end(), [](const BenchRow& r) {
    return r.bytes == 64 * M && r.dtype == BenchDType::kFp16 && r.mode == BenchMode::kGraph &&
           r.algo == BenchAlgo::kTwoShot && r.regime == "INT4";
  });
  ASSERT_NE(int4, rows.end());
  EXPECT_NEAR(int4->link_limit_us, 18.0 * M / 300e3, 1e-9);
  EXPECT_NEAR(int4->ratio_vs_nccl, 1.01, 1e-12);
}

TEST(BenchReportTest, PolicyRowIsLeftOutWhenItsPickWasNotTimed) {
  // Only INT8 two-shot at a size above every one-shot ceiling; regime FP's
  // pick (two-shot FP) was not timed.
  const std::vector<Measurement> m = {
      Meas(64 * M, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kInt8, 100.0)};
  const auto rows = BuildRows(m, {Codec::kFp, Codec::kInt8}, 2, 0.0, Policy());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].algo, BenchAlgo::kPolicy);
  EXPECT_EQ(rows[1].regime, "INT8");
  EXPECT_EQ(rows[1].nccl_us, 0.0);
  EXPECT_EQ(rows[1].ratio_vs_nccl, 0.0);
  EXPECT_EQ(rows[1].link_limit_us, 0.0);
}

TEST(BenchReportTest, MinSizeTableFromSyntheticTimings) {
  const auto rows = BuildRows(Synthetic(), kRegimes, 2, 300.0, Policy());
  const MinSizeTable t = DeriveMinSizeTable(rows, 2, kAmd);
  const int64_t builtin_int3 = MinSizeBytes(kAmd, DType::kFloat16, 2, Regime::kInt3, false) / kMiB;
  EXPECT_EQ(t.mib[0], (std::array<int64_t, 5>{64, 2, 1, 65, builtin_int3}));
  EXPECT_EQ(t.measured[0], (std::array<bool, 5>{true, true, true, true, false}));
  EXPECT_EQ(t.mib[1][0], 0);
  EXPECT_TRUE(t.measured[1][0]);
  for (int c = 1; c < 5; ++c) {
    EXPECT_FALSE(t.measured[1][c]);
    EXPECT_EQ(t.mib[1][c],
              MinSizeBytes(kAmd, DType::kBFloat16, 2, static_cast<Regime>(c), false) / kMiB);
  }
  EXPECT_EQ(t.one_shot_wins_up_to_bytes[0], static_cast<int64_t>(256 * K));
  EXPECT_EQ(t.one_shot_wins_up_to_bytes[1], static_cast<int64_t>(M));
  EXPECT_EQ(t.one_shot_wins_up_to_bytes[2], -1);
  EXPECT_EQ(t.one_shot_max_kb, 256);
  EXPECT_THAT(t.text, HasSubstr("\nfp16 ws2 64 2 1 65 " + std::to_string(builtin_int3) + "\n"));
  EXPECT_THAT(t.text, HasSubstr("never beats NCCL at the largest measured size"));
  EXPECT_THAT(t.text, HasSubstr("INT4 (largest measured 64M)"));
  EXPECT_THAT(t.text, HasSubstr("not measured, built-in value kept: INT3"));
  EXPECT_THAT(t.text, HasSubstr("suggested QR_ONE_SHOT_MAX_KB=256"));
  EXPECT_THAT(t.text, HasSubstr("graph"));
}

TEST(BenchReportTest, UntimedPickEndsTheWalkDown) {
  // At 16K the policy picks one-shot, which was not timed: the floor cannot
  // go below 64M although two-shot FP wins at 16K too.
  ASSERT_EQ(ChooseAlgorithm(Config{}, 16 * K, 2, WorkFormat::kFp16, Codec::kFp),
            Algorithm::kOneShot);
  std::vector<Measurement> m;
  for (size_t b : {16 * K, 64 * M}) {
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kNccl, Codec::kFp, Nccl(b)));
    m.push_back(Meas(b, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kFp, 0.5 * Nccl(b)));
  }
  const MinSizeTable t = DeriveMinSizeTable(BuildRows(m, kRegimes, 2, 0.0, Policy()), 2, kAmd);
  EXPECT_EQ(t.mib[0][0], 64);
  EXPECT_TRUE(t.measured[0][0]);
  EXPECT_THAT(t.text, HasSubstr("may be lower: FP at 16K"));
  EXPECT_EQ(t.one_shot_max_kb, -1);
}

TEST(BenchReportTest, DerivedTableRoundTripsThroughTheConfigParser) {
  const auto rows = BuildRows(Synthetic(), kRegimes, 2, 300.0, Policy());
  const MinSizeTable t = DeriveMinSizeTable(rows, 2, kAmd);
  ASSERT_OK_AND_ASSIGN(MinSizeTableMiB parsed, ParseMinSizeTable(t.text, "derived"));
  for (int d = 0; d < 2; ++d) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(parsed[d][0][c], t.mib[d][c]) << d << " " << c;
    for (int w = 1; w < 3; ++w) EXPECT_EQ(parsed[d][w][0], -1);  // rows for ws 4/8 absent
  }
  // And the table at world size 8 lands in the ws8 row.
  const MinSizeTable t8 = DeriveMinSizeTable({}, 8, kAmd);
  ASSERT_OK_AND_ASSIGN(MinSizeTableMiB parsed8, ParseMinSizeTable(t8.text, "ws8"));
  EXPECT_EQ(parsed8[0][2][0], MinSizeBytes(kAmd, DType::kFloat16, 8, Regime::kFp, false) / kMiB);
  EXPECT_THAT(t8.text, HasSubstr("no QR_ONE_SHOT_MAX_KB suggestion"));
}

TEST(BenchReportTest, CsvHasOneFieldPerColumnAndEmptyUnknowns) {
  const std::string header = CsvHeader();
  EXPECT_EQ(header,
            "bytes,dtype,mode,algo,regime,us,algbw_GBps,nccl_us,ratio_vs_nccl,link_limit_us,"
            "pct_of_link_limit,policy_choice,best_peer,best_peer_us,ratio_vs_best_peer\n");
  const auto rows = BuildRows(
      {Meas(M, BenchDType::kBf16Cast, BenchAlgo::kTwoShot, Codec::kInt6, 20.0, BenchMode::kEager)},
      {}, 2, 0.0, Policy());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(CsvLine(rows[0]), "1048576,bf16cast,eager,two-shot,INT6,20.000,52.43,,,,,,,,\n");
  const auto full = BuildRows(Synthetic(), kRegimes, 2, 300.0, Policy());
  for (const BenchRow& r : full) {
    const std::string line = CsvLine(r);
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 14) << line;
  }
}

// The stronger peers (NCCL's symmetric kernels, PyTorch's symmetric memory)
// get rows of their own, and every quickreduce row names the fastest of them.
TEST(BenchReportTest, EveryQuickReduceRowIsComparedWithTheFastestPeer) {
  std::vector<Measurement> m = {
      Meas(4 * K, BenchDType::kFp16, BenchAlgo::kNccl, Codec::kFp, 10.0),
      Meas(4 * K, BenchDType::kFp16, BenchAlgo::kTorchTwoShot, Codec::kFp, 8.0),
      Meas(4 * K, BenchDType::kFp16, BenchAlgo::kNcclSymm, Codec::kFp, 5.0),
      Meas(4 * K, BenchDType::kFp16, BenchAlgo::kTorchOneShot, Codec::kFp, 6.0),
      Meas(4 * K, BenchDType::kFp16, BenchAlgo::kOneShot, Codec::kFp, 4.0),
      Meas(4 * K, BenchDType::kFp16, BenchAlgo::kTwoShot, Codec::kInt4, 7.5),
  };
  m[4].graph_nodes = 50;
  const auto rows = BuildRows(m, {Codec::kInt4}, 2, 0.0, Policy());
  std::vector<std::string> order;
  for (const BenchRow& r : rows) order.push_back(BenchAlgoName(r.algo));
  EXPECT_THAT(order, ::testing::ElementsAre("two-shot", "one-shot", "policy", "nccl", "nccl-symm",
                                            "torch-one-shot", "torch-two-shot"));
  const BenchRow& two = rows[0];
  EXPECT_EQ(two.best_peer, "nccl-symm");
  EXPECT_DOUBLE_EQ(two.best_peer_us, 5.0);
  EXPECT_DOUBLE_EQ(two.ratio_vs_best_peer, 1.5);
  EXPECT_DOUBLE_EQ(two.ratio_vs_nccl, 0.75);  // still against classic NCCL too
  EXPECT_EQ(rows[1].graph_nodes, 50);
  EXPECT_DOUBLE_EQ(rows[1].ratio_vs_best_peer, 0.8);
  EXPECT_EQ(rows[2].best_peer, "nccl-symm");  // the policy row too
  for (size_t i = 3; i < rows.size(); ++i) {
    EXPECT_TRUE(rows[i].best_peer.empty()) << order[i];  // a baseline has no peer ratio
    EXPECT_DOUBLE_EQ(rows[i].nccl_us, 10.0);
  }
  EXPECT_DOUBLE_EQ(rows[4].ratio_vs_nccl, 0.5);  // NCCL symmetric over classic NCCL
  EXPECT_THAT(CsvLine(two), HasSubstr(",nccl-symm,5.000,1.500\n"));
  // The table line names the fastest peer beyond NCCL.
  EXPECT_THAT(TableLine(rows, {Codec::kInt4}), HasSubstr("one-shot  nccl-symm 5.0\n"));
  // Without peers beyond NCCL, NCCL is the best peer and the line is as before.
  const auto plain = BuildRows({m[0], m[4]}, {}, 2, 0.0, Policy());
  EXPECT_EQ(plain[0].best_peer, "nccl");
  // (No regimes: no policy column entry, "-", and nothing after it.)
  EXPECT_THAT(TableLine(plain, {}), ::testing::EndsWith("0.40   -  -\n"));
}

TEST(BenchReportTest, JsonHoldsHeaderRowsAndTable) {
  const auto rows = BuildRows(Synthetic(), kRegimes, 2, 300.0, Policy());
  const MinSizeTable t = DeriveMinSizeTable(rows, 2, kAmd);
  BenchHeader h;
  h.gpus = {"GPU A", "GPU B"};
  h.world_size = 2;
  h.nccl_version = "2.28.3";
  h.peer.bytes = 256 * M;
  h.peer.reps = 5;
  h.peer.concurrent_gbps = {300.0, 301.0};
  h.peer.alone_gbps = {360.0, 361.0};
  PeerBandwidth tma = h.peer;
  tma.method = "tma 16K";
  tma.concurrent_gbps = {310.0, 305.0};
  h.peer_tma = {tma};
  h.command_line = "qr-bench --quick";
  h.failures = {"1M fp16 graph one-shot: not implemented"};
  const auto j = nlohmann::json::parse(BenchJson(h, rows, t));
  EXPECT_EQ(j["header"]["gpus"].size(), 2u);
  EXPECT_EQ(j["header"]["peer_bandwidth"]["link_GBps"], 300.0);
  EXPECT_EQ(j["header"]["peer_bandwidth"]["method"], "sm");
  ASSERT_EQ(j["header"]["peer_bandwidth_tma"].size(), 1u);
  EXPECT_EQ(j["header"]["peer_bandwidth_tma"][0]["method"], "tma 16K");
  EXPECT_EQ(j["header"]["peer_bandwidth_tma"][0]["link_GBps"], 305.0);
  EXPECT_EQ(j["header"]["failures"][0], h.failures[0]);
  EXPECT_EQ(j["header"]["command_line"], "qr-bench --quick");
  ASSERT_EQ(j["rows"].size(), rows.size());
  EXPECT_EQ(j["rows"][0]["bytes"], rows[0].bytes);
  EXPECT_EQ(j["rows"][0]["algo"], BenchAlgoName(rows[0].algo));
  EXPECT_EQ(j["min_size_table"]["text"], t.text);
  EXPECT_EQ(j["min_size_table"]["one_shot_max_kb"], 256);
  EXPECT_EQ(j["min_size_table"]["fp16_MiB"][3], 65);
  // Bazel keeps this file (test.outputs/): tools/testdata/qr_bench_fixture.json
  // for the plot script's smoke test is a copy of it.
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    ASSERT_OK(WriteTextFile(std::string(dir) + "/qr_bench_fixture.json", BenchJson(h, rows, t)));
  }
  // Unknown values are null, not 0.
  const auto lone = BuildRows({Meas(M, BenchDType::kFp16, BenchAlgo::kOneShot, Codec::kFp, 9.0)},
                              {}, 2, 0.0, Policy());
  const auto j2 =
      nlohmann::json::parse(BenchJson(BenchHeader{}, lone, DeriveMinSizeTable(lone, 2, kAmd)));
  EXPECT_TRUE(j2["rows"][0]["nccl_us"].is_null());
  EXPECT_TRUE(j2["rows"][0]["best_peer"].is_null());
  EXPECT_TRUE(j2["rows"][0]["ratio_vs_best_peer"].is_null());
  EXPECT_TRUE(j2["rows"][0]["graph_nodes"].is_null());
  EXPECT_TRUE(j2["header"]["nccl_version"].is_null());
  EXPECT_TRUE(j2["header"]["peer_bandwidth_tma"].empty());
}

TEST(BenchReportTest, TableLineShowsEveryAlgorithm) {
  const auto rows = BuildRows(Synthetic(), kRegimes, 2, 300.0, Policy());
  std::vector<BenchRow> group;
  for (const BenchRow& r : rows) {
    if (r.bytes == M && r.dtype == BenchDType::kFp16 && r.mode == BenchMode::kGraph) {
      group.push_back(r);
    }
  }
  const std::string line = TableLine(group, kRegimes);
  EXPECT_THAT(line, HasSubstr("1M    fp16     graph"));
  EXPECT_THAT(line, HasSubstr(" 1.20 "));  // one-shot ratio
  EXPECT_THAT(line, HasSubstr(" 1.10 "));  // two-shot FP ratio
  EXPECT_THAT(TableHeader(kRegimes), HasSubstr("2s-INT3"));
  EXPECT_EQ(TableLine({}, kRegimes), "");
}

TEST(BenchReportTest, WriteTextFileReportsTheBadPath) {
  EXPECT_THAT(WriteTextFile("/nonexistent-dir/x.txt", "x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/nonexistent-dir/x.txt")));
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/bench_report_test.txt";
  ASSERT_OK(WriteTextFile(path, "hello\n"));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "hello\n");
}

}  // namespace
}  // namespace qr::bench
