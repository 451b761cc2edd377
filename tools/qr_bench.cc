// qr-bench: per-call time of quickreduce's all-reduce on this machine's GPUs
// (one-shot, two-shot per codec, and the policy's pick), graph-captured and
// eager, against NCCL's ncclAllReduce timed in the same run on the same
// buffers; the measured peer-store bandwidth and each row's % of the link
// limit; the QR_MIN_SIZE_TABLE this machine should use. One process drives
// world_size GPUs through peer access (kernels/gpu/local_group.h runs the
// very kernels the GPU backend launches), or with --launch per-gpu one
// process per GPU goes through the library and the broker as serving
// processes do, with NCCL's symmetric kernels as a second baseline
// (bench_launch.h, bench_worker.h); --torch-symm adds PyTorch's symmetric
// memory (bench_torch.h). NCCL (or RCCL) is dlopened, so the binary builds and
// runs without it. Method and outputs: docs/performance.md "How to run".
//
// `qr-bench --fused [...]` times the fused all-reduce + residual + RMSNorm
// instead (docs/fused.md): per (tokens, hidden, dtype) the all-reduce alone,
// the all-reduce plus a separate RMSNorm kernel and the fused request, in
// the same run, one GPU per rank (tools/bench_fused.h; the flags are
// qr-kernel-cost --fused's, tools/kernel_cost_fused.h).
//
// In parts: flags (bench_options.h, checked before any GPU work), the plan
// and the sweep's failure rules (bench_plan.h), the run (bench_runner.h) with
// its GPU plumbing (bench_gpu.h), NCCL loader (bench_nccl.h) and link
// measurement (bench_peer.h), and the report (bench_report.h).
#include <cstdio>
#include <string>
#include <vector>

#include "tools/bench_fused.h"
#include "tools/bench_launch.h"
#include "tools/bench_options.h"
#include "tools/bench_runner.h"
#include "tools/bench_worker.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--fused") {
    return qr::cost::RunFusedSweep({args.begin() + 1, args.end()}, "qr-bench --fused",
                                   /*one_gpu=*/false);
  }
  const auto o = qr::bench::ParseBenchArgs(args);
  if (!o.ok()) {
    std::fprintf(stderr, "qr-bench: %s\nRun with --help for the flags.\n",
                 o.status().message().c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(qr::bench::BenchUsage().c_str(), stdout);
    return 0;
  }
  std::string command_line = "qr-bench";
  for (const auto& a : args) {
    if (a == "--worker-rank") break;  // the launcher's flags for its workers, appended last
    command_line += " " + a;
  }
  if (o->launch == qr::bench::BenchLaunch::kPerGpu) {
    if (o->worker_rank >= 0) return qr::bench::RunWorker(*o, command_line);
    return qr::bench::LaunchPerGpu(*o, args, qr::bench::SelfExecutable(argv[0]));
  }
  return qr::bench::RunBench(*o, command_line);
}
