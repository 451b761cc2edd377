// qr-kernel-cost --peer-store: the peer-store kernel alone on GPU 0, SM
// stores or TMA bulk copies (tools/kernel_cost_peer_store.h, docs/performance.md "TMA
// bulk stores").
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_peer.h"
#include "tools/kernel_cost_options.h"
#include "tools/kernel_cost_peer_store.h"
#include "tools/kernel_cost_report.h"
#include "tools/kernel_cost_run.h"

namespace qr::cost {
namespace {

// --peer-store: rank 0's peer-store kernel on GPU 0 writing one buffer per
// other rank (MallocShared, as LocalGroup allocates the receive buffers that
// peers write), each cell timed like the all-reduce cells: events around
// `iters` back-to-back launches on one stream.
class PeerStoreRunner {
 public:
  explicit PeerStoreRunner(const CostOptions& o) : o_(o) {}

  Status Init() {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_ASSIGN_OR_RETURN(multiprocessors_, gpu::MultiprocessorCount(0));
    for (int d = 0; d < o_.world_size - 1; ++d) {
      QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::MallocShared(o_.sizes.back()));
      dst_.push_back(std::move(b));
    }
    QR_ASSIGN_OR_RETURN(stream_, gpu::ScopedStream::Create());
    QR_ASSIGN_OR_RETURN(start_, gpu::ScopedEvent::Create());
    QR_ASSIGN_OR_RETURN(stop_, gpu::ScopedEvent::Create());
    return OkStatus();
  }

  int multiprocessors() const { return multiprocessors_; }

  PeerStoreResult Time(const PeerStoreCell& cell) {
    const int iters = ItersFor(o_, cell.bytes);
    std::vector<double> samples;
    const Status s = TimeCell(cell, iters, samples);
    PeerStoreResult r = SummarizePeerStore(cell, static_cast<int>(dst_.size()), iters,
                                           s.ok() ? std::move(samples) : std::vector<double>{});
    if (!s.ok()) {
      r.error = s.message();
      (void)gpu::StreamSynchronize(stream_.get());
    }
    return r;
  }

 private:
  Status TimeCell(const PeerStoreCell& cell, int iters, std::vector<double>& samples) {
    kernels::PeerStoreArgs a;
    for (size_t d = 0; d < dst_.size(); ++d) a.dst[d] = dst_[d].get();
    a.num_dst = static_cast<int>(dst_.size());
    a.bytes_per_dst = cell.bytes;
    a.blocks = PeerStoreGrid(cell, multiprocessors_);
    a.stream = stream_.get();
    bench::SetPeerStoreMethod(cell.method, a);
    // One launch first: a bad cell shows before it is repeated.
    QR_RETURN_IF_ERROR(kernels::LaunchPeerStore(a));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(stream_.get()));
    for (int t = 0; t < o_.warmup + o_.reps; ++t) {
      QR_RETURN_IF_ERROR(gpu::EventRecord(start_.get(), stream_.get()));
      for (int i = 0; i < iters; ++i) QR_RETURN_IF_ERROR(kernels::LaunchPeerStore(a));
      QR_RETURN_IF_ERROR(gpu::EventRecord(stop_.get(), stream_.get()));
      QR_RETURN_IF_ERROR(gpu::EventSynchronize(stop_.get()));
      QR_ASSIGN_OR_RETURN(const float ms, gpu::EventElapsedMs(start_.get(), stop_.get()));
      if (t >= o_.warmup) samples.push_back(static_cast<double>(ms) * 1000.0 / iters);
    }
    return OkStatus();
  }

  const CostOptions& o_;
  int multiprocessors_ = 0;
  std::vector<gpu::DeviceBuffer> dst_;  // rank r + 1's buffer, on GPU 0
  gpu::ScopedStream stream_;
  gpu::ScopedEvent start_, stop_;
};

}  // namespace

int RunPeerStore(CostRun run) {
  const CostOptions& o = run.options;
  PeerStoreRunner runner(o);
  if (const Status s = runner.Init(); !s.ok()) {
    std::fprintf(stderr, "qr-kernel-cost: %s\n", s.message().c_str());
    return 1;
  }
  run.multiprocessors = runner.multiprocessors();
  std::fputs(PeerStoreBanner(run).c_str(), stdout);
  std::fputs(PeerStoreTableHeader().c_str(), stdout);
  std::vector<PeerStoreResult> results;
  bool failed = false;
  for (const PeerStoreCell& cell : PlanPeerStoreCells(o)) {
    results.push_back(runner.Time(cell));
    failed = failed || !results.back().error.empty();
    // The SM cell of a size and grid comes before its TMA cells.
    ComparePeerStoreToSm(results);
    std::fputs(PeerStoreTableLine(run, results.back()).c_str(), stdout);
    std::fflush(stdout);
  }
  return WriteCostOutputs(
      o,
      [&] {
        std::string csv = PeerStoreCsvHeader();
        for (const PeerStoreResult& r : results) csv += PeerStoreCsvLine(run, r);
        return csv;
      },
      [&] { return PeerStoreJson(run, results); }, failed);
}

}  // namespace qr::cost
