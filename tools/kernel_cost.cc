#include "tools/kernel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "CLI/CLI.hpp"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "kernels/geometry.h"
#include "tools/bench_plan.h"
#include "tools/cli_list.h"

namespace qr::cost {
namespace {

constexpr const char* kTwoShotSizes = "4M,64M,256M";
constexpr const char* kOneShotSizes = "4K,64K,256K,1M,4M";
constexpr const char* kPeerStoreSizes = "16M,64M,256M,1G";
constexpr const char* kPeerTmaChunks = "4K,8K,16K,32K";

struct Flags {
  CostOptions o;
  std::string sizes, dtypes, regimes, world_size;
  CLI::Option* sizes_opt = nullptr;
  CLI::Option* dtypes_opt = nullptr;
  CLI::Option* regimes_opt = nullptr;
  CLI::Option* world_size_opt = nullptr;
  CLI::Option* reps_opt = nullptr;
  CLI::Option* iters_opt = nullptr;
  CLI::Option* stagger_opt = nullptr;
  CLI::Option* algorithm_opt = nullptr;
  CLI::Option* mode_opt = nullptr;
  CLI::Option* launch_opt = nullptr;
  CLI::Option* peer_chunks_opt = nullptr;
  CLI::Option* peer_blocks_opt = nullptr;
};

constexpr CostLaunch kLaunches[] = {CostLaunch::kEager, CostLaunch::kGraph,
                                    CostLaunch::kEagerThreads, CostLaunch::kGraphThreads};
// A threaded launch's defaults: one call per sample, enough samples for a p99.
constexpr int kThreadedReps = 200;
constexpr int kThreadedIters = 1;

StatusOr<Algorithm> ParseAlgorithm(const std::string& text) {
  if (text == AlgorithmName(Algorithm::kTwoShot)) return Algorithm::kTwoShot;
  if (text == AlgorithmName(Algorithm::kOneShot)) return Algorithm::kOneShot;
  return InvalidArgumentError(fmt::format("'{}' is not one of two-shot, one-shot", text));
}

StatusOr<CostMode> ParseMode(const std::string& text) {
  for (CostMode m : {CostMode::kShared, CostMode::kAlone}) {
    if (text == CostModeName(m)) return m;
  }
  return InvalidArgumentError(fmt::format("'{}' is not one of shared, alone", text));
}

StatusOr<CostLaunch> ParseLaunch(const std::string& text) {
  for (CostLaunch l : kLaunches) {
    if (text == CostLaunchName(l)) return l;
  }
  return InvalidArgumentError(
      fmt::format("'{}' is not one of eager, graph, eager-threads, graph-threads", text));
}

void DefineFlags(CLI::App& app, Flags& f) {
  tools::UseToolDefaults(app);
  CostOptions& o = f.o;
  f.sizes_opt = app.add_option("--sizes", f.sizes,
                               fmt::format("message sizes (default {} two-shot, {} one-shot)",
                                           kTwoShotSizes, kOneShotSizes))
                    ->type_name("LIST");
  f.dtypes_opt =
      app.add_option("--dtypes", f.dtypes, "fp16,bf16,bf16cast (default all)")->type_name("LIST");
  f.regimes_opt =
      app.add_option("--regimes", f.regimes, "two-shot codecs FP,INT8,INT6,INT4,INT3 (default all)")
          ->type_name("LIST");
  f.world_size_opt =
      app.add_option("--world-size", f.world_size, "ranks, all on GPU 0: 2, 4 or 8 (default 2)")
          ->type_name("N");
  f.algorithm_opt = tools::AddParsedOption<Algorithm>(
      app, "--algorithm", o.algorithm, ParseAlgorithm, "two-shot or one-shot (default two-shot)");
  f.algorithm_opt->type_name("ALGO");
  f.mode_opt = tools::AddParsedOption<CostMode>(
      app, "--mode", o.mode, ParseMode,
      "shared: every rank's kernel; alone: rank 0's only, timing variants no_waits/bare "
      "(default shared)");
  f.mode_opt->type_name("MODE");
  f.launch_opt = tools::AddParsedOption<CostLaunch>(
      app, "--launch", o.launch, ParseLaunch,
      "eager: a host launch per call; graph: the calls captured once, replayed; both from one "
      "host thread. eager-threads, graph-threads: the same from one host thread per rank, "
      "released together for each repetition (default eager)");
  f.launch_opt->type_name("HOW");
  app.add_flag("--peer-store", o.peer_store,
               fmt::format("time the peer-store kernels instead (issue 18 item 8): rank 0 "
                           "writing the other ranks' buffers on GPU 0 by SM stores and by TMA "
                           "bulk copies; sizes per destination (default {}). One GPU: the "
                           "issue side and HBM, not NVLink",
                           kPeerStoreSizes));
  f.peer_chunks_opt = tools::AddListOption<size_t>(
      app, "--peer-tma-chunks", o.peer_tma_chunks, bench::ParseTmaChunk,
      fmt::format("--peer-store: TMA bytes per bulk copy (default {})", kPeerTmaChunks));
  f.peer_blocks_opt = tools::AddListOption<int>(
      app, "--peer-blocks", o.peer_blocks,
      [](const std::string& t) { return tools::ParseIntIn(t, 0, 65536); },
      "--peer-store: grids to time (default 0: 2 blocks per multiprocessor)");
  f.reps_opt = tools::AddParsedOption<int>(
                   app, "--reps", o.reps,
                   [](const std::string& t) { return tools::ParseIntIn(t, 1, 100000); },
                   "timed repetitions per cell (default 7; 200 threaded)")
                   ->type_name("N");
  f.iters_opt =
      tools::AddParsedOption<int>(
          app, "--iters", o.iters,
          [](const std::string& t) { return tools::ParseIntIn(t, 0, 100000); },
          "calls per repetition (default 0: min(50, 256M / size), at least 2; 1 threaded)")
          ->type_name("N");
  f.stagger_opt = tools::AddParsedOption<int>(
                      app, "--stagger", o.stagger_us,
                      [](const std::string& t) { return tools::ParseIntIn(t, 0, 100000); },
                      "threaded launches: rank r starts r x this many microseconds after the "
                      "release (default 0)")
                      ->type_name("US");
  tools::AddParsedOption<int>(
      app, "--warmup", o.warmup, [](const std::string& t) { return tools::ParseIntIn(t, 0, 100); },
      "untimed repetitions first (default 2)")
      ->type_name("N");
  app.add_option("--csv", o.csv_path, "one row per cell")->type_name("FILE");
  app.add_option("--json", o.json_path, "the rows plus the run's facts")->type_name("FILE");
  app.footer(
      "exit: 0 every cell timed, 3 some cells failed (outputs written), 1 fatal, 2 bad flags");
}

}  // namespace

const char* CostModeName(CostMode mode) { return mode == CostMode::kAlone ? "alone" : "shared"; }
const char* CostLaunchName(CostLaunch launch) {
  switch (launch) {
    case CostLaunch::kEager:
      break;
    case CostLaunch::kGraph:
      return "graph";
    case CostLaunch::kEagerThreads:
      return "eager-threads";
    case CostLaunch::kGraphThreads:
      return "graph-threads";
  }
  return "eager";
}

bool LaunchUsesThreads(CostLaunch launch) {
  return launch == CostLaunch::kEagerThreads || launch == CostLaunch::kGraphThreads;
}

bool LaunchUsesGraphs(CostLaunch launch) {
  return launch == CostLaunch::kGraph || launch == CostLaunch::kGraphThreads;
}

std::string CostUsage() {
  CLI::App app{"qr-kernel-cost: the all-reduce kernels' cost on one GPU, every rank on GPU 0",
               "qr-kernel-cost"};
  Flags f;
  DefineFlags(app, f);
  return app.help();
}

StatusOr<CostOptions> ParseCostArgs(const std::vector<std::string>& args) {
  CLI::App app{"qr-kernel-cost", "qr-kernel-cost"};
  Flags f;
  DefineFlags(app, f);
  bool help = false;
  QR_RETURN_IF_ERROR(tools::ParseCli(app, args, &help));
  CostOptions o = f.o;
  if (help) {
    o.help = true;
    return o;
  }
  if (o.peer_store) {
    for (const CLI::Option* opt :
         {f.algorithm_opt, f.mode_opt, f.launch_opt, f.dtypes_opt, f.regimes_opt, f.stagger_opt}) {
      if (opt->count() > 0) {
        return InvalidArgumentError(fmt::format(
            "{}: --peer-store times the peer-store kernels, which take no all-reduce flags",
            opt->get_name()));
      }
    }
  } else {
    for (const CLI::Option* opt : {f.peer_chunks_opt, f.peer_blocks_opt}) {
      if (opt->count() > 0) {
        return InvalidArgumentError(fmt::format("{}: only with --peer-store", opt->get_name()));
      }
    }
  }
  const bool one_shot = o.algorithm == Algorithm::kOneShot;
  const bool threads = LaunchUsesThreads(o.launch);
  if (threads && o.mode == CostMode::kAlone) {
    return InvalidArgumentError(fmt::format(
        "--launch {}: --mode alone launches rank 0 only, so there are no ranks to release "
        "together (use --mode shared)",
        CostLaunchName(o.launch)));
  }
  if (!threads && f.stagger_opt->count() > 0) {
    return InvalidArgumentError(
        "--stagger: only the threaded launches (eager-threads, graph-threads) release ranks");
  }
  if (threads && f.reps_opt->count() == 0) o.reps = kThreadedReps;
  if (threads && f.iters_opt->count() == 0) o.iters = kThreadedIters;
  if (one_shot && f.regimes_opt->count() > 0) {
    return InvalidArgumentError("--regimes: one-shot sends exact values and takes no codec");
  }
  // qr-bench's parser reads the lists (same syntax, same checks, same order).
  std::vector<std::string> bench_args = {"--algos", "two-shot",  "--modes",
                                         "graph",   "--no-nccl", "--no-peer-bandwidth"};
  bench_args.insert(bench_args.end(), {"--sizes", f.sizes_opt->count() > 0 ? f.sizes
                                                  : o.peer_store           ? kPeerStoreSizes
                                                  : one_shot               ? kOneShotSizes
                                                                           : kTwoShotSizes});
  if (f.dtypes_opt->count() > 0) bench_args.insert(bench_args.end(), {"--dtypes", f.dtypes});
  if (f.regimes_opt->count() > 0) bench_args.insert(bench_args.end(), {"--regimes", f.regimes});
  if (f.world_size_opt->count() > 0) {
    bench_args.insert(bench_args.end(), {"--world-size", f.world_size});
  }
  QR_ASSIGN_OR_RETURN(const bench::BenchOptions b, bench::ParseBenchArgs(bench_args));
  o.sizes = b.sizes;
  if (o.peer_store) {
    o.world_size = b.world_size;
    if (f.peer_chunks_opt->count() == 0) {
      o.peer_tma_chunks.clear();
      for (const std::string& c : tools::SplitCommaList(kPeerTmaChunks)) {
        o.peer_tma_chunks.push_back(*bench::ParseTmaChunk(c));
      }
    }
    if (f.peer_blocks_opt->count() == 0) o.peer_blocks = {0};
    return o;
  }
  o.dtypes = b.dtypes;
  o.regimes = one_shot ? std::vector<Codec>{Codec::kFp} : b.regimes;
  o.world_size = b.world_size;
  if (!one_shot) o.notes = b.notes;
  if (one_shot) {
    const size_t max = static_cast<size_t>(kernels::OneShotMaxBytes(o.world_size));
    if (o.sizes.back() > max) {
      return InvalidArgumentError(
          fmt::format("--sizes: one-shot takes at most {} at world size {}, got {}",
                      FormatBytes(max, ByteStyle::kCompact), o.world_size,
                      FormatBytes(o.sizes.back(), ByteStyle::kCompact)));
    }
  }
  return o;
}

Status CheckVariant(const CostOptions& o, std::string_view variant) {
  if (o.mode != CostMode::kAlone || variant == "no_waits" || variant == "bare") return OkStatus();
  return UnsupportedError(fmt::format(
      "--mode alone needs a timing variant that skips the waits (no_waits or bare: "
      ".device/variants/<name>/qr-kernel-cost, staged with QR_STAGE_VARIANTS); this binary is {}, "
      "whose rank 0 would wait for peers that are never launched",
      variant.empty() ? std::string("the real kernels")
                      : "the " + std::string(variant) + " variant"));
}

std::vector<CostCell> PlanCostCells(const CostOptions& o) {
  std::vector<CostCell> cells;
  for (size_t bytes : o.sizes) {
    for (BenchDType d : o.dtypes) {
      if (o.algorithm == Algorithm::kOneShot) {
        cells.push_back({bytes, d, Codec::kFp});
        continue;
      }
      for (Codec c : o.regimes) cells.push_back({bytes, d, c});
    }
  }
  return cells;
}

int ItersFor(const CostOptions& o, size_t bytes) {
  return o.iters > 0 ? o.iters : bench::CallsPerBatch(bytes);
}

double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  // Equal neighbours give that value exactly (no 0 x inf, no rounding).
  if (frac == 0 || samples[lo] == samples[hi]) return samples[lo];
  return samples[lo] + frac * (samples[hi] - samples[lo]);
}

CostResult Summarize(const CostCell& cell, int iters, std::vector<double> samples_us,
                     std::vector<double> skew_us) {
  CostResult r;
  r.cell = cell;
  r.iters = iters;
  r.samples_us = std::move(samples_us);
  r.skew_us = std::move(skew_us);
  if (!r.samples_us.empty()) {
    r.best_us = *std::min_element(r.samples_us.begin(), r.samples_us.end());
    r.median_us = bench::Median(r.samples_us);
    r.p90_us = Percentile(r.samples_us, 0.90);
    r.p99_us = Percentile(r.samples_us, 0.99);
    r.max_us = *std::max_element(r.samples_us.begin(), r.samples_us.end());
  }
  if (!r.skew_us.empty()) {
    r.skew_median_us = bench::Median(r.skew_us);
    r.skew_max_us = *std::max_element(r.skew_us.begin(), r.skew_us.end());
  }
  return r;
}

void SpinBarrier::Wait() {
  const uint64_t round = round_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
    // Reset before the release: a released thread may arrive for the next
    // round at once.
    arrived_.store(0, std::memory_order_relaxed);
    round_.store(round + 1, std::memory_order_release);
    return;
  }
  for (uint32_t spins = 1; round_.load(std::memory_order_acquire) == round; ++spins) {
    if ((spins & 0xFFFFu) == 0) std::this_thread::yield();
  }
}

namespace {

std::string VariantName(const CostRun& run) { return run.variant.empty() ? "real" : run.variant; }

std::string RegimeName(const CostRun& run, const CostCell& c) {
  return run.options.algorithm == Algorithm::kOneShot ? "exact" : CodecName(c.codec);
}

double GBps(size_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0; }

}  // namespace

std::string Banner(const CostRun& run) {
  const CostOptions& o = run.options;
  std::string s = fmt::format(
      "qr-kernel-cost: {} ranks SHARE ONE GPU ({}); these are kernel costs, not link "
      "measurements (peer stores land in the same memory).\n",
      o.world_size, run.gpu.empty() ? "GPU 0" : run.gpu);
  s += fmt::format(
      "kernels: {} ({}), algorithm {}, mode {} ({}), launch {}, grid cap {}\n", VariantName(run),
      run.variant.empty() ? "real kernels" : "timing variant, wrong results",
      AlgorithmName(o.algorithm), CostModeName(o.mode),
      o.mode == CostMode::kAlone ? "rank 0's kernel only" : "every rank's kernel each call",
      CostLaunchName(o.launch), run.max_blocks);
  if (LaunchUsesThreads(o.launch)) {
    s += fmt::format(
        "method: one host thread per rank on its own stream, released together by a spinning "
        "barrier{}; per call = elapsed of N calls / N from the earliest start event to the latest "
        "stop event over the ranks' streams (GPU events), {} warm-up + {} timed repetitions; "
        "min/p50/p90/p99/max, skew = latest minus earliest start event\n",
        o.stagger_us > 0 ? fmt::format(", rank r {} us x r later", o.stagger_us) : "", o.warmup,
        o.reps);
  } else {
    s += fmt::format(
        "method: per call = elapsed of N back-to-back calls / N (GPU events), {} warm-up + {} "
        "timed repetitions; best and median\n",
        o.warmup, o.reps);
  }
  for (const std::string& n : o.notes) s += "note: " + n + "\n";
  return s;
}

std::string CostTableHeader(const CostRun& run) {
  const std::string head =
      fmt::format("{:>8} {:>8} {:>6} {:>6}", "size", "dtype", "regime", "iters");
  if (LaunchUsesThreads(run.options.launch)) {
    return head + fmt::format(" {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}\n", "min us", "p50 us",
                              "p90 us", "p99 us", "max us", "skew p50", "skew max");
  }
  return head + fmt::format(" {:>11} {:>11} {:>9}\n", "best us", "median us", "GB/s");
}

std::string CostTableLine(const CostRun& run, const CostResult& r) {
  const std::string head =
      fmt::format("{:>8} {:>8} {:>6} {:>6}", FormatBytes(r.cell.bytes, ByteStyle::kCompact),
                  bench::BenchDTypeName(r.cell.dtype), RegimeName(run, r.cell), r.iters);
  if (!r.error.empty()) return head + "  FAILED: " + r.error + "\n";
  if (LaunchUsesThreads(run.options.launch)) {
    return head + fmt::format(" {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>10.2f} {:>10.2f}\n",
                              r.best_us, r.median_us, r.p90_us, r.p99_us, r.max_us,
                              r.skew_median_us, r.skew_max_us);
  }
  return head + fmt::format(" {:>11.2f} {:>11.2f} {:>9.1f}\n", r.best_us, r.median_us,
                            GBps(r.cell.bytes, r.best_us));
}

namespace {
// A message as one CSV field: no separators, one line.
std::string CsvField(std::string text) {
  std::replace(text.begin(), text.end(), ',', ';');
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}
}  // namespace

std::string CostCsvHeader() {
  return "algorithm,mode,launch,variant,world_size,bytes,dtype,regime,iters,reps,best_us,"
         "median_us,algbw_gbps,p90_us,p99_us,max_us,stagger_us,skew_median_us,skew_max_us,"
         "error\n";
}

std::string CostCsvLine(const CostRun& run, const CostResult& r) {
  const CostOptions& o = run.options;
  const bool ok = r.error.empty();
  const std::string error = CsvField(r.error);
  auto us = [ok](double v) { return ok ? fmt::format("{:.3f}", v) : std::string(); };
  const bool skew = ok && !r.skew_us.empty();
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                     AlgorithmName(o.algorithm), CostModeName(o.mode), CostLaunchName(o.launch),
                     VariantName(run), o.world_size, r.cell.bytes,
                     bench::BenchDTypeName(r.cell.dtype), RegimeName(run, r.cell), r.iters,
                     r.samples_us.size(), us(r.best_us), us(r.median_us),
                     ok ? fmt::format("{:.2f}", GBps(r.cell.bytes, r.best_us)) : "", us(r.p90_us),
                     us(r.p99_us), us(r.max_us), o.stagger_us, skew ? us(r.skew_median_us) : "",
                     skew ? us(r.skew_max_us) : "", error);
}

std::string CostJson(const CostRun& run, const std::vector<CostResult>& results) {
  const CostOptions& o = run.options;
  nlohmann::json j;
  j["run"] = {
      {"what", "kernel cost: every rank on one GPU; not a link measurement"},
      {"algorithm", AlgorithmName(o.algorithm)},
      {"mode", CostModeName(o.mode)},
      {"launch", CostLaunchName(o.launch)},
      {"variant", VariantName(run)},
      {"world_size", o.world_size},
      {"gpu", run.gpu},
      {"max_blocks", run.max_blocks},
      {"reps", o.reps},
      {"warmup", o.warmup},
      {"iters", o.iters},
      {"stagger_us", o.stagger_us},
      {"threads", LaunchUsesThreads(o.launch)},
      {"command_line", run.command_line},
      {"date", run.date},
      {"notes", o.notes},
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const CostResult& r : results) {
    nlohmann::json row = {
        {"bytes", r.cell.bytes},
        {"dtype", bench::BenchDTypeName(r.cell.dtype)},
        {"regime", RegimeName(run, r.cell)},
        {"iters", r.iters},
        {"samples_us", r.samples_us},
    };
    if (r.error.empty()) {
      row["best_us"] = r.best_us;
      row["median_us"] = r.median_us;
      row["p90_us"] = r.p90_us;
      row["p99_us"] = r.p99_us;
      row["max_us"] = r.max_us;
      if (!r.skew_us.empty()) {
        row["skew_us"] = r.skew_us;
        row["skew_median_us"] = r.skew_median_us;
        row["skew_max_us"] = r.skew_max_us;
      }
    } else {
      row["error"] = r.error;
    }
    rows.push_back(row);
  }
  j["results"] = rows;
  return j.dump(2) + "\n";
}

std::vector<PeerStoreCell> PlanPeerStoreCells(const CostOptions& o) {
  std::vector<PeerStoreCell> cells;
  for (size_t bytes : o.sizes) {
    for (int blocks : o.peer_blocks) {
      for (const bench::PeerStoreChoice& m : bench::PeerStoreChoices(o.peer_tma_chunks)) {
        cells.push_back({bytes, m, blocks});
      }
    }
  }
  return cells;
}

int PeerStoreGrid(const PeerStoreCell& cell, int multiprocessors) {
  return cell.blocks > 0 ? cell.blocks : 2 * multiprocessors;
}

PeerStoreResult SummarizePeerStore(const PeerStoreCell& cell, int destinations, int iters,
                                   std::vector<double> samples_us) {
  PeerStoreResult r;
  r.cell = cell;
  r.destinations = destinations;
  r.iters = iters;
  r.samples_us = std::move(samples_us);
  if (!r.samples_us.empty()) {
    r.best_us = *std::min_element(r.samples_us.begin(), r.samples_us.end());
    r.median_us = bench::Median(r.samples_us);
    r.gbps = GBps(cell.bytes * static_cast<size_t>(destinations), r.best_us);
  }
  return r;
}

void ComparePeerStoreToSm(std::vector<PeerStoreResult>& results) {
  for (PeerStoreResult& r : results) {
    r.vs_sm = 0;
    if (!r.error.empty() || r.gbps <= 0) continue;
    for (const PeerStoreResult& sm : results) {
      if (!sm.cell.method.tma && sm.error.empty() && sm.gbps > 0 && sm.cell.bytes == r.cell.bytes &&
          sm.cell.blocks == r.cell.blocks) {
        r.vs_sm = r.gbps / sm.gbps;
        break;
      }
    }
  }
}

std::string PeerStoreBanner(const CostRun& run) {
  const CostOptions& o = run.options;
  std::string s = fmt::format(
      "qr-kernel-cost --peer-store: rank 0's peer-store kernel writing the buffers of {} other "
      "rank(s), ALL ON ONE GPU ({}): this measures the SM/TMA issue side and HBM, NOT NVLink. "
      "Whether the kernels should use TMA bulk stores is decided on two GPUs by qr-bench "
      "--peer-tma-chunks (docs/performance.md, \"TMA bulk stores\").\n",
      o.world_size - 1, run.gpu.empty() ? "GPU 0" : run.gpu);
  s += fmt::format(
      "methods: sm = 16-byte stores from every thread; tma <chunk> = each block fills <chunk> "
      "bytes of shared memory and one thread issues a bulk copy, two buffers alternating; "
      "grid 0 = 2 x {} multiprocessors\n",
      run.multiprocessors);
  s += fmt::format(
      "method: per launch = elapsed of N back-to-back launches / N (GPU events), {} warm-up + {} "
      "timed repetitions; best and median; GB/s = bytes per destination x destinations / best; "
      "vs sm = GB/s / the SM stores' at the same size and grid\n",
      o.warmup, o.reps);
  return s;
}

std::string PeerStoreTableHeader() {
  return fmt::format("{:>8} {:>9} {:>6} {:>6} {:>11} {:>11} {:>9} {:>7}\n", "size", "method",
                     "blocks", "iters", "best us", "median us", "GB/s", "vs sm");
}

std::string PeerStoreTableLine(const CostRun& run, const PeerStoreResult& r) {
  const std::string head =
      fmt::format("{:>8} {:>9} {:>6} {:>6}", FormatBytes(r.cell.bytes, ByteStyle::kCompact),
                  bench::PeerStoreChoiceName(r.cell.method),
                  PeerStoreGrid(r.cell, run.multiprocessors), r.iters);
  if (!r.error.empty()) return head + "  FAILED: " + r.error + "\n";
  return head + fmt::format(" {:>11.2f} {:>11.2f} {:>9.1f} {:>7}\n", r.best_us, r.median_us, r.gbps,
                            r.vs_sm > 0 ? fmt::format("{:.3f}", r.vs_sm) : "-");
}

std::string PeerStoreCsvHeader() {
  return "what,bytes_per_destination,destinations,method,tma_chunk_bytes,blocks,iters,reps,"
         "best_us,median_us,gbps,vs_sm,error\n";
}

std::string PeerStoreCsvLine(const CostRun& run, const PeerStoreResult& r) {
  const bool ok = r.error.empty();
  const std::string error = CsvField(r.error);
  auto num = [ok](double v, int digits) {
    return ok ? fmt::format("{:.{}f}", v, digits) : std::string();
  };
  return fmt::format("peer-store,{},{},{},{},{},{},{},{},{},{},{},{}\n", r.cell.bytes,
                     r.destinations, r.cell.method.tma ? "tma" : "sm",
                     r.cell.method.tma ? std::to_string(r.cell.method.chunk_bytes) : "",
                     PeerStoreGrid(r.cell, run.multiprocessors), r.iters, r.samples_us.size(),
                     num(r.best_us, 3), num(r.median_us, 3), num(r.gbps, 2),
                     ok && r.vs_sm > 0 ? fmt::format("{:.4f}", r.vs_sm) : "", error);
}

std::string PeerStoreJson(const CostRun& run, const std::vector<PeerStoreResult>& results) {
  const CostOptions& o = run.options;
  nlohmann::json j;
  j["run"] = {
      {"what",
       "peer-store kernels, every rank on one GPU: the SM/TMA issue side and HBM, not NVLink"},
      {"world_size", o.world_size},
      {"gpu", run.gpu},
      {"multiprocessors", run.multiprocessors},
      {"tma_chunks", o.peer_tma_chunks},
      {"blocks", o.peer_blocks},
      {"reps", o.reps},
      {"warmup", o.warmup},
      {"iters", o.iters},
      {"command_line", run.command_line},
      {"date", run.date},
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const PeerStoreResult& r : results) {
    nlohmann::json row = {
        {"bytes_per_destination", r.cell.bytes},
        {"destinations", r.destinations},
        {"method", r.cell.method.tma ? "tma" : "sm"},
        {"tma_chunk_bytes", r.cell.method.chunk_bytes},
        {"blocks", PeerStoreGrid(r.cell, run.multiprocessors)},
        {"iters", r.iters},
        {"samples_us", r.samples_us},
    };
    if (r.error.empty()) {
      row["best_us"] = r.best_us;
      row["median_us"] = r.median_us;
      row["gbps"] = r.gbps;
      row["vs_sm"] = r.vs_sm > 0 ? nlohmann::json(r.vs_sm) : nlohmann::json(nullptr);
    } else {
      row["error"] = r.error;
    }
    rows.push_back(row);
  }
  j["results"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace qr::cost
