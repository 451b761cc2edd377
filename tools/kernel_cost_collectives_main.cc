// qr-kernel-cost --reduce-scatter / --all-gather (tools/kernel_cost_collectives.h):
// the GPU side. Every rank of a LocalGroup on GPU 0, each with a whole-size
// input and output; per cell, the two-shot all-reduce of the whole message
// and then the collective, `iters` calls captured into one graph per rank,
// all ranks' graphs replayed, events around them; the median over `reps`
// repetitions of (latest stop - earliest start) / iters.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "kernels/gpu/local_group.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_gpu.h"
#include "tools/kernel_cost_collectives.h"

namespace qr::cost {
namespace {

using kernels::LocalCall;
using kernels::LocalGroup;

class CollectiveRunner {
 public:
  explicit CollectiveRunner(const CollectiveCostOptions& o) : o_(o) {}

  Status Init() {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_ASSIGN_OR_RETURN(group_, LocalGroup::Create(o_.world_size, 0, /*gpus=*/1));
    const size_t bytes = o_.sizes.back();
    for (int r = 0; r < o_.world_size; ++r) {
      for (auto* v : {&in_, &out_}) {
        QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::Malloc(bytes));
        // 0x3C3C: 1.06 as fp16, 0.0115 as bf16; finite sums.
        QR_RETURN_IF_ERROR(gpu::Memset(b.get(), 0x3C, bytes));
        v->push_back(std::move(b));
      }
    }
    QR_ASSIGN_OR_RETURN(bench::GraphTimer timer, bench::GraphTimer::Create(std::vector<int>(
                                                     static_cast<size_t>(o_.world_size), 0)));
    timer_.emplace(std::move(timer));
    return OkStatus();
  }

  CollectiveCostResult Time(const CollectiveCostCell& cell) {
    CollectiveCostResult r;
    r.cell = cell;
    for (Collective kind : {Collective::kAllReduce, o_.kind}) {
      StatusOr<double> us = TimeKind(cell, kind);
      if (!us.ok()) {
        r.error = us.status().message();
        return r;
      }
      (kind == Collective::kAllReduce ? r.all_reduce_us : r.collective_us) = *us;
    }
    return r;
  }

 private:
  // The all-reduce takes the whole message per rank, the collectives their
  // per-rank count (the reduce-scatter's input and the all-gather's output
  // are the whole message).
  Status Enqueue(int r, const CollectiveCostCell& cell, Collective kind) {
    const size_t count = kind == Collective::kAllReduce ? cell.bytes / 2 : cell.count;
    LocalCall call{cell.dtype, cell.codec, count, 10000, o_.one_shot};
    call.collective = kind;
    return group_->Launch(r, call, in_[r].get(), out_[r].get());
  }

  StatusOr<double> TimeKind(const CollectiveCostCell& cell, Collective kind) {
    const int ws = o_.world_size;
    // One eager call first: fills the launch caches outside any capture.
    for (int r = 0; r < ws; ++r) QR_RETURN_IF_ERROR(Enqueue(r, cell, kind));
    QR_RETURN_IF_ERROR(group_->Synchronize());
    for (int r = 0; r < ws; ++r) {
      if (group_->error(r) != kernels::kGpuErrorNone) return InternalError("a kernel gave up");
    }
    std::vector<void*> streams;
    for (int r = 0; r < ws; ++r) streams.push_back(group_->stream(r));
    QR_ASSIGN_OR_RETURN(const double us,
                        timer_->TimeUs(streams, /*timed=*/ws, o_.iters, o_.reps,
                                       [&](int r) { return Enqueue(r, cell, kind); }));
    for (int r = 0; r < ws; ++r) {
      if (group_->error(r) != kernels::kGpuErrorNone) return InternalError("a kernel gave up");
    }
    return us;
  }

  const CollectiveCostOptions& o_;
  std::unique_ptr<LocalGroup> group_;
  std::vector<gpu::DeviceBuffer> in_, out_;
  std::optional<bench::GraphTimer> timer_;
};

}  // namespace

int RunCollectiveMain(Collective kind, const std::vector<std::string>& args) {
  const char* name = CollectiveCostKindName(kind);
  const auto o = ParseCollectiveCostArgs(kind, args);
  if (!o.ok()) {
    std::fprintf(stderr, "qr-kernel-cost --%s: %s\n%s", name, o.status().message().c_str(),
                 CollectiveCostUsage().c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(CollectiveCostUsage().c_str(), stdout);
    return 0;
  }
  CollectiveRunner runner(*o);
  if (Status s = runner.Init(); !s.ok()) {
    std::fprintf(stderr, "qr-kernel-cost --%s: %s\n", name, s.ToString().c_str());
    return 1;
  }
  std::printf(
      "# %s against the %s all-reduce of the same whole message, world size %d, every "
      "rank on GPU 0 (kernel costs, not link measurements), graph-captured, %d calls per graph\n",
      name, o->one_shot ? "one-shot (both one-shot)" : "two-shot", o->world_size, o->iters);
  std::fputs(CollectiveTableHeader(kind).c_str(), stdout);
  std::string csv = CollectiveCsvHeader();
  int failures = 0;
  for (const CollectiveCostCell& cell : PlanCollectiveCells(*o)) {
    const CollectiveCostResult r = runner.Time(cell);
    failures += r.error.empty() ? 0 : 1;
    std::fputs(CollectiveTableLine(r).c_str(), stdout);
    std::fflush(stdout);
    csv += CollectiveCsvLine(kind, o->one_shot, r);
  }
  if (!o->csv_path.empty()) {
    FILE* f = std::fopen(o->csv_path.c_str(), "w");
    if (f == nullptr || std::fputs(csv.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "qr-kernel-cost --%s: cannot write %s\n", name, o->csv_path.c_str());
      return 1;
    }
  }
  return failures == 0 ? 0 : 3;
}

std::optional<int> RunCollectiveModeIfNamed(const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "--reduce-scatter" && args[0] != "--all-gather")) {
    return std::nullopt;
  }
  return RunCollectiveMain(
      args[0] == "--all-gather" ? Collective::kAllGather : Collective::kReduceScatter,
      {args.begin() + 1, args.end()});
}

}  // namespace qr::cost
