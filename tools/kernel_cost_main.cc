// qr-kernel-cost: the one-shot and two-shot kernels' cost on ONE GPU, every
// rank of the group on GPU 0 (tools/kernel_cost_options.h says what the modes
// measure). The "before"/"after" numbers of kernel changes come from here:
// they need no second GPU and no NCCL. docs/performance.md, "Kernel cost on
// one GPU".
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_report.h"
#include "tools/kernel_cost_collectives.h"
#include "tools/kernel_cost_fused.h"
#include "tools/kernel_cost_options.h"
#include "tools/kernel_cost_report.h"
#include "tools/kernel_cost_run.h"

namespace qr::cost {

int WriteCostOutputs(const CostOptions& o, const std::function<std::string()>& csv,
                     const std::function<std::string()>& json, bool failed) {
  for (const auto& [path, text] : {std::pair{&o.csv_path, &csv}, std::pair{&o.json_path, &json}}) {
    if (path->empty()) continue;
    if (const Status s = bench::WriteTextFile(*path, (*text)()); !s.ok()) {
      std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
      return 1;
    }
  }
  return failed ? 3 : 0;
}

namespace {

int Run(const CostOptions& o, const std::string& command_line) {
  CostRun run;
  run.options = o;
  run.variant = kernels::TwoShotTimingVariant();
  run.command_line = command_line;
  run.date = bench::UtcTimestamp();
  if (const Status s = CheckVariant(o, run.variant); !s.ok()) {
    std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
    return 2;
  }
  if (!o.peer_store) std::printf("two-shot INT4/INT8 sync: %s\n", kernels::TwoShotSyncName());
  if (gpu::DeviceCount() < 1) {
    std::fprintf(stderr, "qr-kernel-cost: no GPU\n");
    return 1;
  }
  if (auto bus = gpu::PciBusId(0); bus.ok()) run.gpu = "GPU 0 at " + *bus;
  if (o.peer_store) {
    if (auto name = kernels::GpuDeviceName(0); name.ok()) {
      run.gpu = run.gpu.empty() ? *name : *name + ", " + run.gpu;
    }
    return RunPeerStore(std::move(run));
  }
  return RunAllReduceCost(std::move(run));
}

}  // namespace
}  // namespace qr::cost

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  // --fused first: tools/kernel_cost_fused.h.
  if (!args.empty() && args[0] == "--fused")
    return qr::cost::RunFusedMain({args.begin() + 1, args.end()});
  // --reduce-scatter / --all-gather: tools/kernel_cost_collectives.h.
  if (const auto rc = qr::cost::RunCollectiveModeIfNamed(args)) return *rc;
  const auto o = qr::cost::ParseCostArgs(args);
  if (!o.ok()) {
    std::fprintf(stderr, "qr-kernel-cost: %s\nRun with --help for the flags.\n",
                 o.status().message().c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(qr::cost::CostUsage().c_str(), stdout);
    return 0;
  }
  std::string command_line = "qr-kernel-cost";
  for (const auto& a : args) command_line += " " + a;
  return qr::cost::Run(*o, command_line);
}
