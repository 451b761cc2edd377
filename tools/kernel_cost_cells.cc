#include "tools/kernel_cost_cells.h"

#include <algorithm>
#include <cmath>

#include "tools/bench_plan.h"

namespace qr::cost {

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

}  // namespace qr::cost
