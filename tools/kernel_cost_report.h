// qr-kernel-cost's outputs for the all-reduce cells: the banner, a table
// line per cell, CSV and JSON, and the facts of the run they all record
// (CostRun, which the --peer-store outputs of kernel_cost_peer_store.h
// record too).
#ifndef QR_TOOLS_KERNEL_COST_REPORT_H_
#define QR_TOOLS_KERNEL_COST_REPORT_H_

#include <string>
#include <vector>

#include "tools/kernel_cost_cells.h"
#include "tools/kernel_cost_options.h"

namespace qr::cost {

// What every output records about the run.
struct CostRun {
  CostOptions options;
  std::string variant;  // "" = real kernels
  std::string gpu;
  int max_blocks = 0;
  std::string command_line;
  std::string date;         // ISO 8601 UTC
  int multiprocessors = 0;  // --peer-store: what a grid of 0 means
};

// The lines printed before the first cell: ranks share one GPU, kernel
// costs not link measurements, the variant, the mode and method.
std::string Banner(const CostRun& run);
// Best, median and GB/s; min / p50 / p90 / p99 / max and the skew for the
// threaded launches.
std::string CostTableHeader(const CostRun& run);
std::string CostTableLine(const CostRun& run, const CostResult& r);
// CSV with a header line; one line per result, trailing newlines.
std::string CostCsvHeader();
std::string CostCsvLine(const CostRun& run, const CostResult& r);
// {"run": {...}, "results": [...]}, pretty-printed.
std::string CostJson(const CostRun& run, const std::vector<CostResult>& results);

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_REPORT_H_
