// qr-bench's run: the group of world_size GPUs (kernels/gpu/local_group.h,
// the kernels the GPU backend launches), the NCCL baseline, the peer-store
// bandwidth, then the cells of tools/bench_plan.h timed one by one, each
// table line printed and each CSV row written as it completes, and the
// report (JSON, min-size table) at the end.
//
// Robustness matters more than elegance here: the device machine's time is
// scarce, so output paths are checked before any GPU work, a cell that fails
// is recorded and skipped, a poisoned group (kernel timeout) is rebuilt
// (SweepGuard), and the CSV is written as rows come in.
#ifndef QR_TOOLS_BENCH_RUNNER_H_
#define QR_TOOLS_BENCH_RUNNER_H_

#include <string>

#include "tools/bench_options.h"

namespace qr::bench {

// The process exit code: 0 every cell timed, 3 some cells failed (outputs
// written), 1 fatal (no GPUs, group set-up; outputs still written), 2 an
// output cannot be written. `command_line` goes into the report.
int RunBench(const BenchOptions& options, std::string command_line);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_RUNNER_H_
