// qr-kernel-cost's all-reduce cells (tools/kernel_cost_options.h says what the
// modes measure): every rank of a LocalGroup on GPU 0, each cell's calls
// eager or graph-captured, events on every launched rank's stream.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/max_blocks.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_gpu.h"
#include "tools/kernel_cost_cells.h"
#include "tools/kernel_cost_options.h"
#include "tools/kernel_cost_report.h"
#include "tools/kernel_cost_run.h"
#include "tools/spin_barrier.h"

namespace qr::cost {
namespace {

using kernels::LocalCall;
using kernels::LocalGroup;

class Runner {
 public:
  Runner(const CostOptions& o, int ranks) : o_(o), ranks_(ranks) {}

  Status Init(size_t max_bytes) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_RETURN_IF_ERROR(NewGroup());
    // Every rank's buffers on its GPU in the group: GPU 0.
    for (int r = 0; r < o_.world_size; ++r) devices_.push_back(group_->device(r));
    QR_RETURN_IF_ERROR(bench::FillInputs(bufs_, max_bytes, devices_));
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
    std::vector<double> samples, skews;
    Status s = TimeCell(cell, iters, samples, skews);
    if (s.ok()) s = CheckErrors();
    CostResult r = s.ok() ? Summarize(cell, iters, std::move(samples), std::move(skews))
                          : Summarize(cell, iters, {});
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

  Status LaunchRank(int r, const LocalCall& call) {
    return group_->Launch(r, call, bufs_.in[r].get(), bufs_.out[r].get());
  }

  Status LaunchOnce(const LocalCall& call) {
    for (int r = 0; r < ranks_; ++r) QR_RETURN_IF_ERROR(LaunchRank(r, call));
    return OkStatus();
  }

  // One graph per launched rank: `iters` calls captured on its stream.
  StatusOr<bench::Graphs> Capture(const LocalCall& call, int iters) {
    bench::Graphs graphs(std::vector<int>(devices_.begin(), devices_.begin() + ranks_));
    for (int r = 0; r < ranks_; ++r) {
      QR_RETURN_IF_ERROR(bench::CaptureRank(
          r, group_->stream(r), /*thread_local_mode=*/false,
          [&]() -> Status {
            for (int i = 0; i < iters; ++i) QR_RETURN_IF_ERROR(LaunchRank(r, call));
            return OkStatus();
          },
          &graphs));
    }
    return graphs;
  }

  std::vector<void*> Streams() const {
    std::vector<void*> streams;
    for (int r = 0; r < ranks_; ++r) streams.push_back(group_->stream(r));
    return streams;
  }

  // Per-call microseconds from the earliest start to the latest stop event
  // over the launched ranks' streams, and the start skew (latest minus
  // earliest start) in microseconds.
  StatusOr<std::pair<double, double>> Span(int iters) {
    double first = 0, last = 0, latest_start = 0;
    for (int r = 0; r < ranks_; ++r) {
      QR_ASSIGN_OR_RETURN(float s, gpu::EventElapsedMs(start_[0].get(), start_[r].get()));
      QR_ASSIGN_OR_RETURN(float e, gpu::EventElapsedMs(start_[0].get(), stop_[r].get()));
      first = std::min(first, static_cast<double>(s));
      latest_start = std::max(latest_start, static_cast<double>(s));
      last = std::max(last, static_cast<double>(e));
    }
    return std::make_pair((last - first) * 1000.0 / iters, (latest_start - first) * 1000.0);
  }

  // One repetition: per-call microseconds from the earliest start to the
  // latest stop over the launched ranks' streams.
  StatusOr<double> Rep(const LocalCall& call, int iters, const bench::Graphs* graphs) {
    QR_RETURN_IF_ERROR(group_->Synchronize());
    for (int r = 0; r < ranks_; ++r)
      QR_RETURN_IF_ERROR(gpu::EventRecord(start_[r].get(), group_->stream(r)));
    if (graphs != nullptr) {
      QR_RETURN_IF_ERROR(graphs->LaunchAll(Streams()));
    } else {
      for (int i = 0; i < iters; ++i) QR_RETURN_IF_ERROR(LaunchOnce(call));
    }
    for (int r = 0; r < ranks_; ++r)
      QR_RETURN_IF_ERROR(gpu::EventRecord(stop_[r].get(), group_->stream(r)));
    for (int r = 0; r < ranks_; ++r) QR_RETURN_IF_ERROR(gpu::EventSynchronize(stop_[r].get()));
    QR_ASSIGN_OR_RETURN(const auto span, Span(iters));
    return span.first;
  }

  // Rank r's part of a threaded repetition, on its own thread: its start
  // event, its calls (or its graph), its stop event, and the wait for them.
  Status RankRep(int r, const LocalCall& call, int iters, const bench::Graphs* graphs) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(group_->device(r)));
    QR_RETURN_IF_ERROR(gpu::EventRecord(start_[r].get(), group_->stream(r)));
    if (graphs != nullptr) {
      QR_RETURN_IF_ERROR(graphs->Launch(r, group_->stream(r)));
    } else {
      for (int i = 0; i < iters; ++i) QR_RETURN_IF_ERROR(LaunchRank(r, call));
    }
    QR_RETURN_IF_ERROR(gpu::EventRecord(stop_[r].get(), group_->stream(r)));
    return gpu::StreamSynchronize(group_->stream(r));
  }

  // The threaded launches: every rank's calls from a thread of its own, as
  // separate processes would issue them (each its own stream, its own launch
  // queue, no order between the ranks' launches), all released by one
  // spinning barrier per repetition, rank r r x stagger_us later. The events
  // time the call as the other modes do, GPU-side: the host clock would add
  // each thread's wake-up from StreamSynchronize, which is host noise and
  // not what the kernels' waits make of a late peer; the start events are
  // still recorded by each rank's thread just before its launch, so the
  // ranks' real launch skew is inside every sample (and reported).
  //
  // LocalGroup is not thread-safe in general; here each thread touches only
  // its own rank's stream, events and RankState (whose launch caches are
  // atomics), and the group's per-timeout states were built by the eager
  // call that TimeCell makes first, so concurrent Launch calls only read them.
  Status TimeThreaded(const LocalCall& call, int iters, const bench::Graphs* graphs,
                      std::vector<double>& samples, std::vector<double>& skews) {
    tools::SpinBarrier barrier(ranks_);
    std::atomic<bool> failed{false};
    std::vector<Status> status(ranks_, OkStatus());
    Status span_status = OkStatus();
    const int total = o_.warmup + o_.reps;
    auto body = [&](int r) {
      for (int t = 0; t < total; ++t) {
        barrier.Wait();
        if (o_.stagger_us > 0 && r > 0) {
          const auto until = std::chrono::steady_clock::now() +
                             std::chrono::microseconds(int64_t{o_.stagger_us} * r);
          while (std::chrono::steady_clock::now() < until) {
          }
        }
        // A failed rank stops launching but keeps meeting the barrier, so
        // that no thread waits forever; its peers' kernels give up on their
        // bounded waits.
        if (!failed.load(std::memory_order_relaxed)) {
          Status s = RankRep(r, call, iters, graphs);
          if (!s.ok()) {
            status[r] = std::move(s);
            failed.store(true, std::memory_order_relaxed);
          }
        }
        barrier.Wait();
        // Rank 0 reads the events while the others wait at the next release.
        if (r == 0 && t >= o_.warmup && !failed.load(std::memory_order_relaxed)) {
          auto span = Span(iters);
          if (!span.ok()) {
            span_status = span.status();
            failed.store(true, std::memory_order_relaxed);
          } else {
            samples.push_back(span->first);
            skews.push_back(span->second);
          }
        }
      }
    };
    std::vector<std::thread> threads;
    for (int r = 1; r < ranks_; ++r) threads.emplace_back(body, r);
    body(0);
    for (auto& t : threads) t.join();
    for (const Status& s : status) QR_RETURN_IF_ERROR(s);
    return span_status;
  }

  Status TimeCell(const CostCell& cell, int iters, std::vector<double>& samples,
                  std::vector<double>& skews) {
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
    std::optional<bench::Graphs> graphs;
    if (LaunchUsesGraphs(o_.launch)) {
      QR_ASSIGN_OR_RETURN(bench::Graphs g, Capture(call, iters));
      graphs.emplace(std::move(g));
    }
    const bench::Graphs* replay = graphs.has_value() ? &*graphs : nullptr;
    if (LaunchUsesThreads(o_.launch)) {
      QR_RETURN_IF_ERROR(TimeThreaded(call, iters, replay, samples, skews));
      return group_->Synchronize();
    }
    for (int w = 0; w < o_.warmup; ++w) {
      QR_RETURN_IF_ERROR(Rep(call, iters, replay).status());
    }
    for (int t = 0; t < o_.reps; ++t) {
      QR_ASSIGN_OR_RETURN(double us, Rep(call, iters, replay));
      samples.push_back(us);
    }
    return group_->Synchronize();
  }

  const CostOptions& o_;
  const int ranks_;  // ranks launched: world size (shared) or 1 (alone)
  std::unique_ptr<LocalGroup> group_;
  std::vector<int> devices_;  // rank r's GPU in the group
  bench::DeviceBuffers bufs_;
  // Events on every launched rank's stream (all on GPU 0).
  std::vector<gpu::ScopedEvent> start_, stop_;
};

}  // namespace

int RunAllReduceCost(CostRun run) {
  const CostOptions& o = run.options;
  Runner runner(o, o.mode == CostMode::kAlone ? 1 : o.world_size);
  if (const Status s = runner.Init(o.sizes.back()); !s.ok()) {
    std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
    return 1;
  }
  run.max_blocks = runner.max_blocks();
  std::fputs(Banner(run).c_str(), stdout);
  std::fputs(CostTableHeader(run).c_str(), stdout);
  std::vector<CostResult> results;
  bool failed = false;
  for (const CostCell& cell : PlanCostCells(o)) {
    results.push_back(runner.Time(cell));
    failed = failed || !results.back().error.empty();
    std::fputs(CostTableLine(run, results.back()).c_str(), stdout);
    std::fflush(stdout);
  }
  return WriteCostOutputs(
      o,
      [&] {
        std::string csv = CostCsvHeader();
        for (const CostResult& r : results) csv += CostCsvLine(run, r);
        return csv;
      },
      [&] { return CostJson(run, results); }, failed);
}

}  // namespace qr::cost
