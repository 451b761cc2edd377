// What qr-demo's rank 0 prints after the calls: the table of checked and
// timed calls with the notes that explain its columns, and the policy block
// (what a caller that sets only QR_* variables gets).
#ifndef QR_TOOLS_QR_DEMO_REPORT_H_
#define QR_TOOLS_QR_DEMO_REPORT_H_

#include <string>
#include <vector>

#include "comm/config.h"
#include "comm/quickreduce.h"

namespace qr::demo {

// One checked and timed (regime, dtype, size).
struct DemoRow {
  std::string regime, dtype, size, algorithm;
  double max_error = 0;  // largest |output - exact sum|
  double ratio = 0;      // largest error / proven bound
  bool exact = false;    // bit-identical to the host reference
  bool passed = false;   // exact, and within the bound everywhere
  double us_per_call = 0;
  double gbps = 0;  // message bytes / time per call
};

// The table, then which calls ran one-shot (the library's ceiling under
// `config`) and what the columns mean.
std::string ResultTable(const std::vector<DemoRow>& rows, const Config& config, int world_size,
                        bool on_gpu);

// The regime qr_all_reduce runs under `config` (and where it came from), and
// qr_should_all_reduce's answers for a few sizes from `comm`, which must
// still be joined (after qr_leave every answer is no).
std::string PolicyText(const qr_comm* comm, const Config& config, int world_size);

}  // namespace qr::demo

#endif  // QR_TOOLS_QR_DEMO_REPORT_H_
