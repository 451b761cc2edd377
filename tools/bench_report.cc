#include "tools/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "comm/config.h"
#include "comm/policy.h"
#include "common/bytes.h"
#include "kernels/codec_layout.h"
#include "nlohmann/json.hpp"

namespace qr::bench {
namespace {

using GroupKey = std::tuple<size_t, BenchDType, BenchMode>;

GroupKey KeyOf(const BenchCell& c) { return {c.bytes, c.dtype, c.mode}; }

std::string Fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

// Empty for "unknown" (0), so that CSV readers see a missing value, not a zero.
std::string FieldOrEmpty(double v, int digits) { return v > 0 ? Fixed(v, digits) : ""; }

void Finish(BenchRow& row, size_t bytes, int ws, double nccl_us, double link_gbps, Algorithm algo,
            Codec codec) {
  row.algbw_gbps = static_cast<double>(bytes) / row.us / 1e3;
  row.nccl_us = nccl_us;
  row.ratio_vs_nccl = nccl_us > 0 ? row.us / nccl_us : 0;
  row.link_limit_us = LinkLimitUs(algo, codec, bytes, ws, link_gbps);
  row.pct_of_link_limit = row.link_limit_us > 0 ? 100.0 * row.link_limit_us / row.us : 0;
}

struct Floor {
  enum Kind { kNoData, kNever, kFrom } kind = kNoData;
  size_t bytes = 0;    // kFrom: the smallest size of the winning tail
  size_t largest = 0;  // the largest size with an NCCL number
  size_t gap = 0;      // a size below the tail where the pick was not timed (0: none)
};

// Walks the sizes that have an NCCL number (graph) from the largest down for
// as long as the policy's pick for `regime` was timed and beats NCCL. A size
// whose pick was not timed ends the walk (the floor stays above what is
// unknown); no pick at the largest size means no data at all.
Floor FloorFor(const std::vector<BenchRow>& rows, BenchDType dtype, Codec regime) {
  std::map<size_t, const BenchRow*> policy;
  std::set<size_t> nccl_sizes;
  for (const BenchRow& r : rows) {
    if (r.mode != BenchMode::kGraph || r.dtype != dtype || !(r.nccl_us > 0)) continue;
    nccl_sizes.insert(r.bytes);
    if (r.algo == BenchAlgo::kPolicy && r.regime == CodecName(regime)) policy[r.bytes] = &r;
  }
  Floor f;
  if (nccl_sizes.empty() || policy.count(*nccl_sizes.rbegin()) == 0) return f;
  f.largest = *nccl_sizes.rbegin();
  f.kind = Floor::kNever;
  for (auto it = nccl_sizes.rbegin(); it != nccl_sizes.rend(); ++it) {
    const auto p = policy.find(*it);
    if (p == policy.end()) {
      f.gap = *it;
      break;
    }
    if (!(p->second->us < p->second->nccl_us)) break;
    f.kind = Floor::kFrom;
    f.bytes = *it;
  }
  return f;
}

int64_t FloorMiB(const Floor& f) {
  if (f.kind == Floor::kFrom) return static_cast<int64_t>(f.bytes / kBenchMiB);
  return static_cast<int64_t>(f.largest / kBenchMiB) + 1;
}

// Largest measured size where one-shot beats two-shot FP (graph); -1 if none compared.
int64_t OneShotWinsUpTo(const std::vector<BenchRow>& rows, BenchDType dtype) {
  std::map<size_t, double> one, two;
  for (const BenchRow& r : rows) {
    if (r.mode != BenchMode::kGraph || r.dtype != dtype) continue;
    if (r.algo == BenchAlgo::kOneShot) one[r.bytes] = r.us;
    if (r.algo == BenchAlgo::kTwoShot && r.regime == "FP") two[r.bytes] = r.us;
  }
  int64_t best = -1;
  for (const auto& [bytes, us] : one) {
    auto it = two.find(bytes);
    if (it == two.end()) continue;
    if (best < 0) best = 0;
    if (us < it->second) best = static_cast<int64_t>(bytes);
  }
  return best;
}

std::string CodecList(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

}  // namespace

double PeerBandwidth::LinkGBps() const {
  if (concurrent_gbps.empty()) return 0;
  return *std::min_element(concurrent_gbps.begin(), concurrent_gbps.end());
}

double WireBytesPerGpu(Algorithm algo, Codec codec, size_t bytes, int world_size) {
  const double b = static_cast<double>(bytes);
  if (algo == Algorithm::kOneShot) return (world_size - 1) * b;
  return 2.0 * (world_size - 1) / world_size * b * kernels::WireRatio(codec);
}

double LinkLimitUs(Algorithm algo, Codec codec, size_t bytes, int world_size, double link_gbps) {
  if (!(link_gbps > 0)) return 0;
  return WireBytesPerGpu(algo, codec, bytes, world_size) / (link_gbps * 1e3);
}

std::vector<BenchRow> BuildRows(const std::vector<Measurement>& measurements,
                                const std::vector<Codec>& regimes, int world_size, double link_gbps,
                                const Config& policy) {
  std::vector<GroupKey> order;
  std::map<GroupKey, std::vector<const Measurement*>> groups;
  for (const Measurement& m : measurements) {
    if (!(m.us > 0)) continue;
    const GroupKey k = KeyOf(m.cell);
    if (groups.find(k) == groups.end()) order.push_back(k);
    groups[k].push_back(&m);
  }
  std::vector<BenchRow> rows;
  for (const GroupKey& k : order) {
    const auto& [bytes, dtype, mode] = k;
    double nccl_us = 0;
    std::optional<double> one_shot;
    std::map<Codec, double> two_shot;
    std::map<BenchAlgo, double> baselines;  // in BenchAlgo order
    std::map<std::pair<BenchAlgo, Codec>, int> nodes;
    for (const Measurement* m : groups[k]) {
      if (m->cell.algo == BenchAlgo::kNccl) nccl_us = m->us;
      if (IsBaseline(m->cell.algo)) baselines[m->cell.algo] = m->us;
      if (m->cell.algo == BenchAlgo::kOneShot) one_shot = m->us;
      if (m->cell.algo == BenchAlgo::kTwoShot) two_shot[m->cell.codec] = m->us;
      nodes[{m->cell.algo, m->cell.codec}] = m->graph_nodes;
    }
    const auto best =
        std::min_element(baselines.begin(), baselines.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    auto add = [&](BenchAlgo algo, const std::string& regime, double us, Algorithm wire_algo,
                   Codec wire_codec, std::string choice) {
      BenchRow row;
      row.bytes = bytes;
      row.dtype = dtype;
      row.mode = mode;
      row.algo = algo;
      row.regime = regime;
      row.us = us;
      row.policy_choice = std::move(choice);
      Finish(row, bytes, world_size, nccl_us, link_gbps, wire_algo, wire_codec);
      if (algo != BenchAlgo::kPolicy) {
        const auto n = nodes.find({algo, algo == BenchAlgo::kTwoShot ? wire_codec : Codec::kFp});
        if (n != nodes.end()) row.graph_nodes = n->second;
      }
      if (!IsBaseline(algo) && best != baselines.end()) {
        row.best_peer = BenchAlgoName(best->first);
        row.best_peer_us = best->second;
        row.ratio_vs_best_peer = us / best->second;
      }
      rows.push_back(row);
    };
    for (const auto& [codec, us] : two_shot) {
      add(BenchAlgo::kTwoShot, CodecName(codec), us, Algorithm::kTwoShot, codec, "");
    }
    if (one_shot) add(BenchAlgo::kOneShot, "FP", *one_shot, Algorithm::kOneShot, Codec::kFp, "");
    for (Codec regime : regimes) {
      const Codec codec = EffectiveCodec(policy, static_cast<Regime>(regime), bytes);
      const Algorithm algo = ChooseAlgorithm(policy, bytes, world_size, dtype, codec);
      std::optional<double> us;
      if (algo == Algorithm::kOneShot) {
        us = one_shot;
      } else if (auto it = two_shot.find(codec); it != two_shot.end()) {
        us = it->second;
      }
      if (us) add(BenchAlgo::kPolicy, CodecName(regime), *us, algo, codec, AlgorithmName(algo));
    }
    for (const auto& [algo, us] : baselines) {
      add(algo, "-", us, Algorithm::kTwoShot, Codec::kFp, "");
    }
  }
  return rows;
}

MinSizeTable DeriveMinSizeTable(const std::vector<BenchRow>& rows, int world_size,
                                Platform platform) {
  MinSizeTable t;
  std::vector<std::string> comments;
  const BenchDType table_dtypes[2] = {BenchDType::kFp16, BenchDType::kBf16};
  const DType dtypes[2] = {DType::kFloat16, DType::kBFloat16};
  std::string body;
  for (int d = 0; d < 2; ++d) {
    std::vector<std::string> never, missing, gaps;
    const std::string row = fmt::format("{} ws{}", DTypeName(dtypes[d]), world_size);
    body += row;
    for (int c = 0; c < kNumCodecs; ++c) {
      const Codec codec = kAllCodecs[c];
      const Floor f = FloorFor(rows, table_dtypes[d], codec);
      if (f.kind == Floor::kNoData) {
        const int64_t builtin =
            MinSizeBytes(platform, dtypes[d], world_size, static_cast<Regime>(codec), false);
        t.mib[d][c] =
            builtin == kNeverEligible ? static_cast<int64_t>(kMaxMaxSizeMb) : builtin / kMiB;
        t.measured[d][c] = false;
        missing.push_back(CodecName(codec));
      } else {
        t.mib[d][c] = FloorMiB(f);
        t.measured[d][c] = true;
        if (f.kind == Floor::kNever) {
          never.push_back(fmt::format("{} (largest measured {})", CodecName(codec),
                                      FormatBytes(f.largest, ByteStyle::kCompact)));
        } else if (f.gap != 0) {
          gaps.push_back(
              fmt::format("{} at {}", CodecName(codec), FormatBytes(f.gap, ByteStyle::kCompact)));
        }
      }
      body += fmt::format(" {}", t.mib[d][c]);
    }
    body += "\n";
    if (!never.empty()) {
      comments.push_back(
          fmt::format("# {}: never beats NCCL at the largest measured size, floor set above it: {}",
                      row, CodecList(never)));
    }
    if (!gaps.empty()) {
      comments.push_back(fmt::format(
          "# {}: the policy's pick was not timed below the floor, so it may be lower: {}", row,
          CodecList(gaps)));
    }
    if (!missing.empty()) {
      comments.push_back(
          fmt::format("# {}: not measured, built-in value kept: {}", row, CodecList(missing)));
    }
  }
  // bf16 with the cast has no row of its own; show what its data says.
  std::vector<std::string> cast_floors;
  for (int c = 0; c < kNumCodecs; ++c) {
    const Floor f = FloorFor(rows, BenchDType::kBf16Cast, kAllCodecs[c]);
    if (f.kind == Floor::kNoData) continue;
    cast_floors.push_back(fmt::format("{} {}{}", CodecName(kAllCodecs[c]), FloorMiB(f),
                                      f.kind == Floor::kNever ? " (never)" : ""));
  }
  if (!cast_floors.empty()) {
    comments.push_back(
        "# bf16 with QR_CAST_BF16_TO_FP16=1 (the default on AMD) uses the fp16 row; "
        "bf16cast measured alone would give: " +
        CodecList(cast_floors));
  }
  std::vector<std::string> wins;
  for (BenchDType d : {BenchDType::kFp16, BenchDType::kBf16, BenchDType::kBf16Cast}) {
    const int64_t up_to = OneShotWinsUpTo(rows, d);
    t.one_shot_wins_up_to_bytes[static_cast<int>(d)] = up_to;
    if (up_to < 0) continue;
    wins.push_back(
        fmt::format("{} {}", BenchDTypeName(d),
                    up_to == 0 ? std::string("never")
                               : FormatBytes(static_cast<uint64_t>(up_to), ByteStyle::kCompact)));
    const int64_t kb = up_to / kKiB;
    t.one_shot_max_kb = t.one_shot_max_kb < 0 ? kb : std::min(t.one_shot_max_kb, kb);
  }
  if (!wins.empty()) {
    comments.push_back(fmt::format(
        "# one-shot beats two-shot FP (graph) up to: {} -> suggested QR_ONE_SHOT_MAX_KB={}",
        CodecList(wins), t.one_shot_max_kb));
  } else {
    comments.push_back(
        "# one-shot vs two-shot FP: not both measured, no QR_ONE_SHOT_MAX_KB suggestion");
  }
  t.text = fmt::format(
      "# QR_MIN_SIZE_TABLE derived by qr-bench from graph-mode timings, world size {}: per "
      "regime the smallest measured size (MiB, rounded down; 0 = no floor) from\n"
      "# which the policy's pick (one-shot/two-shot, default config) beats NCCL at that "
      "and every larger measured size.\n"
      "#    ws    FP INT8 INT6 INT4 INT3\n{}",
      world_size, body);
  for (const auto& c : comments) t.text += c + "\n";
  return t;
}

std::string CsvHeader() {
  return "bytes,dtype,mode,algo,regime,us,algbw_GBps,nccl_us,ratio_vs_nccl,link_limit_us,"
         "pct_of_link_limit,policy_choice,best_peer,best_peer_us,ratio_vs_best_peer\n";
}

std::string CsvLine(const BenchRow& r) {
  return fmt::format("{},{},{},{},{},{:.3f},{:.2f},{},{},{},{},{},{},{},{}\n", r.bytes,
                     BenchDTypeName(r.dtype), BenchModeName(r.mode), BenchAlgoName(r.algo),
                     r.regime, r.us, r.algbw_gbps, FieldOrEmpty(r.nccl_us, 3),
                     FieldOrEmpty(r.ratio_vs_nccl, 3), FieldOrEmpty(r.link_limit_us, 3),
                     FieldOrEmpty(r.pct_of_link_limit, 1), r.policy_choice, r.best_peer,
                     FieldOrEmpty(r.best_peer_us, 3), FieldOrEmpty(r.ratio_vs_best_peer, 3));
}

std::string BenchJson(const BenchHeader& h, const std::vector<BenchRow>& rows,
                      const MinSizeTable& table) {
  using nlohmann::json;
  auto or_null = [](double v) { return v > 0 ? json(v) : json(nullptr); };
  auto peer_json = [&or_null](const PeerBandwidth& p) {
    return json{{"method", p.method},
                {"bytes_per_destination", p.bytes},
                {"reps", p.reps},
                {"concurrent_GBps", p.concurrent_gbps},
                {"alone_GBps", p.alone_gbps},
                {"link_GBps", or_null(p.LinkGBps())}};
  };
  json tma = json::array();
  for (const PeerBandwidth& p : h.peer_tma) tma.push_back(peer_json(p));
  json head = {
      {"gpus", h.gpus},
      {"world_size", h.world_size},
      {"max_blocks", h.max_blocks},
      {"driver_runtime", h.driver_runtime},
      {"nccl_version", h.nccl_version.empty() ? json(nullptr) : json(h.nccl_version)},
      {"peer_bandwidth", peer_json(h.peer)},
      {"peer_bandwidth_tma", tma},
      {"timing_method", h.timing_method},
      {"command_line", h.command_line},
      {"date", h.date},
      {"wall_seconds", h.wall_seconds},
      {"notes", h.notes},
      {"failures", h.failures},
  };
  json jrows = json::array();
  for (const BenchRow& r : rows) {
    jrows.push_back({{"bytes", r.bytes},
                     {"dtype", BenchDTypeName(r.dtype)},
                     {"mode", BenchModeName(r.mode)},
                     {"algo", BenchAlgoName(r.algo)},
                     {"regime", r.regime},
                     {"us", r.us},
                     {"algbw_GBps", r.algbw_gbps},
                     {"nccl_us", or_null(r.nccl_us)},
                     {"ratio_vs_nccl", or_null(r.ratio_vs_nccl)},
                     {"link_limit_us", or_null(r.link_limit_us)},
                     {"pct_of_link_limit", or_null(r.pct_of_link_limit)},
                     {"policy_choice", r.policy_choice},
                     {"best_peer", r.best_peer.empty() ? json(nullptr) : json(r.best_peer)},
                     {"best_peer_us", or_null(r.best_peer_us)},
                     {"ratio_vs_best_peer", or_null(r.ratio_vs_best_peer)},
                     {"graph_nodes", r.graph_nodes >= 0 ? json(r.graph_nodes) : json(nullptr)}});
  }
  json jtable = {{"text", table.text},
                 {"fp16_MiB", table.mib[0]},
                 {"bf16_MiB", table.mib[1]},
                 {"fp16_measured", table.measured[0]},
                 {"bf16_measured", table.measured[1]},
                 {"one_shot_max_kb",
                  table.one_shot_max_kb >= 0 ? json(table.one_shot_max_kb) : json(nullptr)}};
  return json({{"header", head}, {"rows", jrows}, {"min_size_table", jtable}}).dump(1) + "\n";
}

std::string TableHeader(const std::vector<Codec>& regimes) {
  std::string s =
      fmt::format("{:<5} {:<8} {:<5} {:>8} {:>16}", "size", "dtype", "mode", "NCCL", "one-shot");
  for (Codec c : regimes) s += fmt::format(" {:>16}", fmt::format("2s-{}", CodecName(c)));
  return s + "  policy\n" + std::string(s.size() + 8, '-') + "\n";
}

std::string TableLine(const std::vector<BenchRow>& group, const std::vector<Codec>& regimes) {
  if (group.empty()) return "";
  auto cell = [](const BenchRow* r) -> std::string {
    if (r == nullptr) return "               -";
    const std::string ratio = r->ratio_vs_nccl > 0 ? Fixed(r->ratio_vs_nccl, 2) : "-";
    const std::string link = r->pct_of_link_limit > 0 ? Fixed(r->pct_of_link_limit, 0) + "%" : "-";
    return fmt::format(" {:7.1f} {:>4} {:>3}", r->us, ratio, link);
  };
  const BenchRow* nccl = nullptr;
  const BenchRow* one = nullptr;
  std::string policy;
  const BenchRow* best = nullptr;  // the fastest baseline other than NCCL
  for (const BenchRow& r : group) {
    if (IsBaseline(r.algo) && r.algo != BenchAlgo::kNccl && (best == nullptr || r.us < best->us)) {
      best = &r;
    }
    if (r.algo == BenchAlgo::kNccl) nccl = &r;
    if (r.algo == BenchAlgo::kOneShot) one = &r;
    if (r.algo == BenchAlgo::kPolicy && policy.empty()) policy = r.policy_choice;
  }
  std::string s =
      fmt::format("{:<5} {:<8} {:<5} {:>8}", FormatBytes(group[0].bytes, ByteStyle::kCompact),
                  BenchDTypeName(group[0].dtype), BenchModeName(group[0].mode),
                  nccl ? Fixed(nccl->us, 1) : "-");
  s += cell(one);
  for (Codec c : regimes) {
    const BenchRow* two = nullptr;
    for (const BenchRow& r : group) {
      if (r.algo == BenchAlgo::kTwoShot && r.regime == CodecName(c)) two = &r;
    }
    s += cell(two);
  }
  s += "  " + (policy.empty() ? "-" : policy);
  // Stronger peers than classic NCCL, where timed: the fastest, by name.
  if (best != nullptr) s += fmt::format("  {} {:.1f}", BenchAlgoName(best->algo), best->us);
  return s + "\n";
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return InvalidArgumentError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  const size_t n = std::fwrite(text.data(), 1, text.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (n != text.size() || !closed) {
    return InvalidArgumentError(fmt::format("writing {} failed: {}", path, std::strerror(errno)));
  }
  return OkStatus();
}

std::string UtcTimestamp() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace qr::bench
