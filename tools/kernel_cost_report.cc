#include "tools/kernel_cost_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "tools/kernel_cost_format.h"

namespace qr::cost {
namespace {

std::string VariantName(const CostRun& run) { return run.variant.empty() ? "real" : run.variant; }

std::string RegimeName(const CostRun& run, const CostCell& c) {
  return run.options.algorithm == Algorithm::kOneShot ? "exact" : CodecName(c.codec);
}

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

}  // namespace qr::cost
