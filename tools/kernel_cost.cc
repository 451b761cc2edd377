#include "tools/kernel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

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

struct Flags {
  CostOptions o;
  std::string sizes, dtypes, regimes, world_size;
  CLI::Option* sizes_opt = nullptr;
  CLI::Option* dtypes_opt = nullptr;
  CLI::Option* regimes_opt = nullptr;
  CLI::Option* world_size_opt = nullptr;
};

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
  for (CostLaunch l : {CostLaunch::kEager, CostLaunch::kGraph}) {
    if (text == CostLaunchName(l)) return l;
  }
  return InvalidArgumentError(fmt::format("'{}' is not one of eager, graph", text));
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
  tools::AddParsedOption<Algorithm>(app, "--algorithm", o.algorithm, ParseAlgorithm,
                                    "two-shot or one-shot (default two-shot)")
      ->type_name("ALGO");
  tools::AddParsedOption<CostMode>(app, "--mode", o.mode, ParseMode,
                                   "shared: every rank's kernel; alone: rank 0's only, timing "
                                   "variants no_waits/bare (default shared)")
      ->type_name("MODE");
  tools::AddParsedOption<CostLaunch>(
      app, "--launch", o.launch, ParseLaunch,
      "eager: a host launch per call; graph: the calls captured once, replayed (default eager)")
      ->type_name("HOW");
  tools::AddParsedOption<int>(
      app, "--reps", o.reps, [](const std::string& t) { return tools::ParseIntIn(t, 1, 1000); },
      "timed repetitions per cell (default 7)")
      ->type_name("N");
  tools::AddParsedOption<int>(
      app, "--iters", o.iters, [](const std::string& t) { return tools::ParseIntIn(t, 0, 100000); },
      "calls per repetition (default 0: min(50, 256M / size), at least 2)")
      ->type_name("N");
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
  return launch == CostLaunch::kGraph ? "graph" : "eager";
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
  const bool one_shot = o.algorithm == Algorithm::kOneShot;
  if (one_shot && f.regimes_opt->count() > 0) {
    return InvalidArgumentError("--regimes: one-shot sends exact values and takes no codec");
  }
  // qr-bench's parser reads the lists (same syntax, same checks, same order).
  std::vector<std::string> bench_args = {"--algos", "two-shot",  "--modes",
                                         "graph",   "--no-nccl", "--no-peer-bandwidth"};
  bench_args.insert(bench_args.end(), {"--sizes", f.sizes_opt->count() > 0 ? f.sizes
                                                  : one_shot               ? kOneShotSizes
                                                                           : kTwoShotSizes});
  if (f.dtypes_opt->count() > 0) bench_args.insert(bench_args.end(), {"--dtypes", f.dtypes});
  if (f.regimes_opt->count() > 0) bench_args.insert(bench_args.end(), {"--regimes", f.regimes});
  if (f.world_size_opt->count() > 0) {
    bench_args.insert(bench_args.end(), {"--world-size", f.world_size});
  }
  QR_ASSIGN_OR_RETURN(const bench::BenchOptions b, bench::ParseBenchArgs(bench_args));
  o.sizes = b.sizes;
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

CostResult Summarize(const CostCell& cell, int iters, std::vector<double> samples_us) {
  CostResult r;
  r.cell = cell;
  r.iters = iters;
  r.samples_us = std::move(samples_us);
  if (!r.samples_us.empty()) {
    r.best_us = *std::min_element(r.samples_us.begin(), r.samples_us.end());
    r.median_us = bench::Median(r.samples_us);
  }
  return r;
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
  s += fmt::format(
      "method: per call = elapsed of N back-to-back calls / N (GPU events), {} warm-up + {} timed "
      "repetitions; best and median\n",
      o.warmup, o.reps);
  for (const std::string& n : o.notes) s += "note: " + n + "\n";
  return s;
}

std::string CostTableHeader() {
  return fmt::format("{:>8} {:>8} {:>6} {:>6} {:>11} {:>11} {:>9}\n", "size", "dtype", "regime",
                     "iters", "best us", "median us", "GB/s");
}

std::string CostTableLine(const CostRun& run, const CostResult& r) {
  const std::string head =
      fmt::format("{:>8} {:>8} {:>6} {:>6}", FormatBytes(r.cell.bytes, ByteStyle::kCompact),
                  bench::BenchDTypeName(r.cell.dtype), RegimeName(run, r.cell), r.iters);
  if (!r.error.empty()) return head + "  FAILED: " + r.error + "\n";
  return head + fmt::format(" {:>11.2f} {:>11.2f} {:>9.1f}\n", r.best_us, r.median_us,
                            GBps(r.cell.bytes, r.best_us));
}

std::string CostCsvHeader() {
  return "algorithm,mode,launch,variant,world_size,bytes,dtype,regime,iters,reps,best_us,"
         "median_us,algbw_gbps,error\n";
}

std::string CostCsvLine(const CostRun& run, const CostResult& r) {
  const CostOptions& o = run.options;
  const bool ok = r.error.empty();
  std::string error = r.error;
  std::replace(error.begin(), error.end(), ',', ';');
  std::replace(error.begin(), error.end(), '\n', ' ');
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", AlgorithmName(o.algorithm),
                     CostModeName(o.mode), CostLaunchName(o.launch), VariantName(run), o.world_size,
                     r.cell.bytes, bench::BenchDTypeName(r.cell.dtype), RegimeName(run, r.cell),
                     r.iters, r.samples_us.size(), ok ? fmt::format("{:.3f}", r.best_us) : "",
                     ok ? fmt::format("{:.3f}", r.median_us) : "",
                     ok ? fmt::format("{:.2f}", GBps(r.cell.bytes, r.best_us)) : "", error);
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
    } else {
      row["error"] = r.error;
    }
    rows.push_back(row);
  }
  j["results"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace qr::cost
