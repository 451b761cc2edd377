// qr-kernel-cost's all-reduce cells: what to time (a size, dtype and regime
// each, in the order the outputs list them) and the statistics of a cell's
// samples (kernel_cost_options.h says how they are taken).
#ifndef QR_TOOLS_KERNEL_COST_CELLS_H_
#define QR_TOOLS_KERNEL_COST_CELLS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/types.h"
#include "tools/bench_options.h"
#include "tools/kernel_cost_options.h"

namespace qr::cost {

// One thing to time; codec is kFp for one-shot.
struct CostCell {
  size_t bytes = 0;
  BenchDType dtype = BenchDType::kFp16;
  Codec codec = Codec::kFp;
};
// Sizes ascending, then dtypes, then regimes (one cell per size and dtype for
// one-shot).
std::vector<CostCell> PlanCostCells(const CostOptions& o);
// Calls per repetition for a cell of `bytes`.
int ItersFor(const CostOptions& o, size_t bytes);

// The q-quantile (0 <= q <= 1) of the samples, interpolated linearly between
// the two nearest order statistics (position q x (n - 1)), so that q = 0.5 is
// bench::Median; 0 when empty.
double Percentile(std::vector<double> samples, double q);

// A cell's per-call times, one per repetition (microseconds), summarised.
struct CostResult {
  CostCell cell;
  int iters = 0;
  std::vector<double> samples_us;
  double best_us = 0;                         // smallest sample
  double median_us = 0;                       // bench::Median
  double p90_us = 0, p99_us = 0, max_us = 0;  // Percentile
  // Threaded launches: per repetition, the latest minus the earliest start
  // event over the ranks' streams; empty otherwise.
  std::vector<double> skew_us;
  double skew_median_us = 0, skew_max_us = 0;
  std::string error;  // non-empty: the cell failed (no times)
};
CostResult Summarize(const CostCell& cell, int iters, std::vector<double> samples_us,
                     std::vector<double> skew_us = {});

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_CELLS_H_
