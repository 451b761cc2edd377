// qr-kernel-cost: the one-shot and two-shot kernels' cost on ONE GPU, every
// rank of the group on GPU 0 (tools/kernel_cost.h says what the modes
// measure). The "before"/"after" numbers of kernel changes come from here:
// they need no second GPU and no NCCL. docs/performance.md, "Kernel cost on
// one GPU".
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/max_blocks.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_gpu.h"
#include "tools/bench_report.h"
#include "tools/kernel_cost.h"

namespace qr::cost {
namespace {

using kernels::LocalCall;
using kernels::LocalGroup;

// One graph per launched rank: `iters` calls captured on its stream.
using RankGraphs = std::vector<gpu::ScopedGraph>;

class Runner {
 public:
  Runner(const CostOptions& o, int ranks) : o_(o), ranks_(ranks) {}

  Status Init(size_t max_bytes) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_RETURN_IF_ERROR(NewGroup());
    // FillInputs for one rank allocates on GPU 0 only; every rank's buffers
    // live there.
    bufs_.resize(o_.world_size);
    for (auto& b : bufs_) {
      b = std::make_unique<bench::DeviceBuffers>();
      QR_RETURN_IF_ERROR(bench::FillInputs(*b, max_bytes, 1));
    }
    for (auto* v : {&start_, &stop_}) {
      for (int r = 0; r < ranks_; ++r) {
        QR_ASSIGN_OR_RETURN(gpu::ScopedEvent e, gpu::ScopedEvent::Create());
        v->push_back(std::move(e));
      }
    }
    return OkStatus();
  }

  int max_blocks() const { return group_->max_blocks(); }

  CostResult Time(const CostCell& cell) {
    const int iters = ItersFor(o_, cell.bytes);
    std::vector<double> samples;
    Status s = TimeCell(cell, iters, samples);
    if (s.ok()) s = CheckErrors();
    CostResult r = Summarize(cell, iters, s.ok() ? samples : std::vector<double>{});
    if (!s.ok()) {
      r.error = s.message();
      // A kernel that gave up leaves its error word set (sticky): start over.
      (void)group_->Synchronize();
      const Status rebuilt = NewGroup();
      if (!rebuilt.ok()) r.error += "; the group could not be rebuilt: " + rebuilt.message();
    }
    return r;
  }

 private:
  Status NewGroup() {
    group_.reset();
    // Alone, only rank 0 runs: nothing has to stay co-resident with it, so it
    // gets the grid a rank with a GPU of its own has (not the shared cap).
    int max_blocks = 0;
    if (o_.mode == CostMode::kAlone) {
      QR_ASSIGN_OR_RETURN(max_blocks, kernels::DefaultMaxBlocks(0));
    }
    QR_ASSIGN_OR_RETURN(group_, LocalGroup::Create(o_.world_size, max_blocks, /*gpus=*/1));
    return OkStatus();
  }

  Status CheckErrors() {
    for (int r = 0; r < ranks_; ++r) {
      const uint32_t e = group_->error(r);
      if (e != kernels::kGpuErrorNone) {
        return InternalError("rank " + std::to_string(r) + "'s kernel gave up (" +
                             (e == kernels::kGpuErrorTimeout ? "timeout" : "abort") + ")");
      }
    }
    return OkStatus();
  }

  Status LaunchOnce(const LocalCall& call) {
    for (int r = 0; r < ranks_; ++r) {
      QR_RETURN_IF_ERROR(group_->Launch(r, call, bufs_[r]->in[0].get(), bufs_[r]->out[0].get()));
    }
    return OkStatus();
  }

  Status Capture(const LocalCall& call, int iters, RankGraphs& graphs) {
    graphs.clear();
    for (int r = 0; r < ranks_; ++r) {
      QR_ASSIGN_OR_RETURN(
          gpu::ScopedGraph g,
          bench::CaptureStream(0, group_->stream(r), /*thread_local_mode=*/false, [&]() -> Status {
            for (int i = 0; i < iters; ++i) {
              QR_RETURN_IF_ERROR(
                  group_->Launch(r, call, bufs_[r]->in[0].get(), bufs_[r]->out[0].get()));
            }
            return OkStatus();
          }));
      graphs.push_back(std::move(g));
    }
    return OkStatus();
  }

  // One repetition: per-call microseconds from the earliest start to the
  // latest stop over the launched ranks' streams.
  StatusOr<double> Rep(const LocalCall& call, int iters, const RankGraphs* graphs) {
    QR_RETURN_IF_ERROR(group_->Synchronize());
    for (int r = 0; r < ranks_; ++r)
      QR_RETURN_IF_ERROR(gpu::EventRecord(start_[r].get(), group_->stream(r)));
    if (graphs != nullptr) {
      for (int r = 0; r < ranks_; ++r) {
        QR_RETURN_IF_ERROR((*graphs)[r].Launch(group_->stream(r)));
      }
    } else {
      for (int i = 0; i < iters; ++i) QR_RETURN_IF_ERROR(LaunchOnce(call));
    }
    for (int r = 0; r < ranks_; ++r)
      QR_RETURN_IF_ERROR(gpu::EventRecord(stop_[r].get(), group_->stream(r)));
    for (int r = 0; r < ranks_; ++r) QR_RETURN_IF_ERROR(gpu::EventSynchronize(stop_[r].get()));
    double first = 0, last = 0;
    for (int r = 0; r < ranks_; ++r) {
      QR_ASSIGN_OR_RETURN(float s, gpu::EventElapsedMs(start_[0].get(), start_[r].get()));
      QR_ASSIGN_OR_RETURN(float e, gpu::EventElapsedMs(start_[0].get(), stop_[r].get()));
      first = std::min(first, static_cast<double>(s));
      last = std::max(last, static_cast<double>(e));
    }
    return (last - first) * 1000.0 / iters;
  }

  Status TimeCell(const CostCell& cell, int iters, std::vector<double>& samples) {
    LocalCall call;
    call.format = cell.dtype;
    call.codec = cell.codec;
    call.count = cell.bytes / 2;
    call.one_shot = o_.algorithm == Algorithm::kOneShot;
    // One eager call first: it fills the launch code's caches outside any
    // capture and shows a bad cell before it is repeated.
    QR_RETURN_IF_ERROR(LaunchOnce(call));
    QR_RETURN_IF_ERROR(group_->Synchronize());
    QR_RETURN_IF_ERROR(CheckErrors());
    RankGraphs graphs;
    const bool graph = o_.launch == CostLaunch::kGraph;
    if (graph) QR_RETURN_IF_ERROR(Capture(call, iters, graphs));
    for (int w = 0; w < o_.warmup; ++w) {
      QR_RETURN_IF_ERROR(Rep(call, iters, graph ? &graphs : nullptr).status());
    }
    for (int t = 0; t < o_.reps; ++t) {
      QR_ASSIGN_OR_RETURN(double us, Rep(call, iters, graph ? &graphs : nullptr));
      samples.push_back(us);
    }
    return group_->Synchronize();
  }

  const CostOptions& o_;
  const int ranks_;  // ranks launched: world size (shared) or 1 (alone)
  std::unique_ptr<LocalGroup> group_;
  std::vector<std::unique_ptr<bench::DeviceBuffers>> bufs_;
  // Events on every launched rank's stream (all on GPU 0).
  std::vector<gpu::ScopedEvent> start_, stop_;
};

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
  if (gpu::DeviceCount() < 1) {
    std::fprintf(stderr, "qr-kernel-cost: no GPU\n");
    return 1;
  }
  if (auto bus = gpu::PciBusId(0); bus.ok()) run.gpu = "GPU 0 at " + *bus;
  Runner runner(o, o.mode == CostMode::kAlone ? 1 : o.world_size);
  if (const Status s = runner.Init(o.sizes.back()); !s.ok()) {
    std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
    return 1;
  }
  run.max_blocks = runner.max_blocks();
  std::fputs(Banner(run).c_str(), stdout);
  std::fputs(CostTableHeader().c_str(), stdout);
  std::vector<CostResult> results;
  bool failed = false;
  for (const CostCell& cell : PlanCostCells(o)) {
    results.push_back(runner.Time(cell));
    failed = failed || !results.back().error.empty();
    std::fputs(CostTableLine(run, results.back()).c_str(), stdout);
    std::fflush(stdout);
  }
  if (!o.csv_path.empty()) {
    std::string csv = CostCsvHeader();
    for (const CostResult& r : results) csv += CostCsvLine(run, r);
    if (const Status s = bench::WriteTextFile(o.csv_path, csv); !s.ok()) {
      std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!o.json_path.empty()) {
    if (const Status s = bench::WriteTextFile(o.json_path, CostJson(run, results)); !s.ok()) {
      std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
      return 1;
    }
  }
  return failed ? 3 : 0;
}

}  // namespace
}  // namespace qr::cost

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
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
