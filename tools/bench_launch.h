// qr-bench --launch per-gpu: the launcher. It starts one worker process per
// GPU (fork+exec of qr-bench itself with --worker-rank r --coord SOCKET
// appended to its own flags: tools/bench_worker.h), serves their side
// channel (tools/bench_coord.h: barriers, rank 0's NCCL unique id, the
// slowest rank's time), and waits. Rank 0 writes every output (table, CSV,
// JSON, nccl-tests table, min-size table) exactly as the single-process mode
// does. With --torch-symm the launcher first runs PyTorch's
// symmetric-memory bench (tools/bench_torch.h) and hands its CSV to rank 0.
//
// Host code only: the process plumbing is tested in CI with a fake worker
// (tools/bench_launch_test.cc).
#ifndef QR_TOOLS_BENCH_LAUNCH_H_
#define QR_TOOLS_BENCH_LAUNCH_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/bench_coord.h"
#include "tools/bench_options.h"

namespace qr::bench {

// qr-bench's exit status from its workers' (rank order): a worker's 1 or 2
// (rank 0's first) or a signal (128 + n: 1) wins; else 3 if any said 3 (some
// cell failed); else 0. Empty: 1.
int CombineWorkerExits(const std::vector<int>& codes);

struct WorkerGroupResult {
  std::vector<int> exit_codes;  // per rank: the exit status, 128 + signal
  bool timed_out = false;       // stopped at the timeout (SIGKILL)
  std::string abort_reason;     // the coordinator's, when it closed every connection
};

// Starts argvs[r] (argv[0] a path) for each rank and serves `server` until
// all have exited. When one exits with a status other than 0 or 3 while
// others run, the server is aborted (their next exchange fails) and they
// get `grace` to exit before SIGKILL; at `timeout` every worker still
// running is killed. An error only when a worker cannot be started (those
// started are killed).
[[nodiscard]] StatusOr<WorkerGroupResult> RunWorkerGroup(
    const std::vector<std::vector<std::string>>& argvs, CoordServer& server,
    std::chrono::milliseconds timeout, std::chrono::milliseconds grace = std::chrono::seconds(15));

// The launcher: `args` is qr-bench's argv[1..] (passed on to the workers),
// `self` its executable. The process exit status, as RunBench's.
int LaunchPerGpu(const BenchOptions& o, const std::vector<std::string>& args,
                 const std::string& self);

// This executable's path (/proc/self/exe), or argv0 when it cannot be read.
std::string SelfExecutable(const std::string& argv0);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_LAUNCH_H_
