// qr-bench's GPU plumbing over the neutral runtime API
// (kernels/platform/gpu_api.h): one stream per rank, GPU r for rank r unless
// the caller names each rank's GPU (qr-kernel-cost puts every rank on GPU 0).
// A stopwatch of events on rank 0's stream, the batch timing method of
// tools/bench_plan.h, per-rank graph capture, and the input and output
// buffers every cell reuses, all held in gpu_api.h's owners. Every function
// may change the calling thread's current device.
#ifndef QR_TOOLS_BENCH_GPU_H_
#define QR_TOOLS_BENCH_GPU_H_

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/platform/gpu_api.h"

namespace qr::bench {

// Waits for every rank's stream, rank r's on GPU RankDevice(devices, r).
[[nodiscard]] Status SyncAll(const std::vector<void*>& streams,
                             const std::vector<int>& devices = {});

// Events on rank 0's stream around whatever enqueue() puts on every stream.
class Stopwatch {
 public:
  [[nodiscard]] static StatusOr<Stopwatch> Create();

  // Milliseconds from before enqueue() to after it, all streams synchronized.
  [[nodiscard]] StatusOr<double> TimeMs(const std::vector<void*>& streams,
                                        const std::function<Status()>& enqueue);

 private:
  Stopwatch(gpu::ScopedEvent start, gpu::ScopedEvent stop)
      : start_(std::move(start)), stop_(std::move(stop)) {}
  gpu::ScopedEvent start_;
  gpu::ScopedEvent stop_;
};

// The timing method of tools/bench_plan.h: `batch` enqueues `calls` calls on
// every rank. Returns microseconds per call.
[[nodiscard]] StatusOr<double> TimeBatches(Stopwatch& watch, const std::vector<void*>& streams,
                                           int calls, const std::function<Status()>& batch);

// Rank r's GPU: devices[r], or r when devices is empty.
int RankDevice(const std::vector<int>& devices, int rank);

// One captured graph per rank (empty until CaptureRank fills it).
struct Graphs {
  // Rank r on GPU r.
  explicit Graphs(int ranks) : exec(ranks) {}
  // Rank r on GPU devices[r].
  explicit Graphs(std::vector<int> rank_devices)
      : exec(rank_devices.size()), devices(std::move(rank_devices)) {}
  std::vector<gpu::ScopedGraph> exec;
  std::vector<int> devices;  // empty: rank r on GPU r
  // Replays rank's graph on `stream` (a stream of the rank's GPU).
  [[nodiscard]] Status Launch(int rank, void* stream) const;
  // Replays every rank's graph on its stream, rank 0 first.
  [[nodiscard]] Status LaunchAll(const std::vector<void*>& streams) const;
};

// Captures enqueue() on `stream` of GPU `device` into a graph (in the
// thread-local capture mode when other threads capture at the same time); a
// failure inside the capture still ends it, so the stream stays usable.
[[nodiscard]] StatusOr<gpu::ScopedGraph> CaptureStream(int device, void* stream,
                                                       bool thread_local_mode,
                                                       const std::function<Status()>& enqueue);
// CaptureStream on rank's stream (on the rank's GPU in graphs) into
// graphs->exec[rank].
[[nodiscard]] Status CaptureRank(int rank, void* stream, bool thread_local_mode,
                                 const std::function<Status()>& enqueue, Graphs* graphs);

// Graph replays timed with a pair of events a rank (qr-kernel-cost's
// collectives and fused sweeps, qr-bench --fused).
class GraphTimer {
 public:
  // Events for ranks 0 .. devices.size() - 1, rank r's on GPU devices[r].
  [[nodiscard]] static StatusOr<GraphTimer> Create(std::vector<int> devices);

  // Captures `iters` calls of enqueue(r) on each rank r < streams.size()
  // into a graph of its own, replays them all reps + 1 times (the first a
  // warm-up) and returns the median microseconds a call of the span from
  // the earliest start to the latest stop over ranks 0 .. timed - 1: every
  // rank where they share a GPU, rank 0 alone with a GPU a rank (events of
  // different GPUs cannot be compared; its last call ends after every rank
  // contributed). Every stream is idle on return.
  [[nodiscard]] StatusOr<double> TimeUs(const std::vector<void*>& streams, int timed, int iters,
                                        int reps, const std::function<Status(int rank)>& enqueue);

 private:
  GraphTimer(std::vector<int> devices, std::vector<gpu::ScopedEvent> start,
             std::vector<gpu::ScopedEvent> stop)
      : devices_(std::move(devices)), start_(std::move(start)), stop_(std::move(stop)) {}
  std::vector<int> devices_;
  std::vector<gpu::ScopedEvent> start_, stop_;
};

// One input and one output buffer per rank (on the rank's GPU).
struct DeviceBuffers {
  std::vector<gpu::DeviceBuffer> in, out;
};

// Allocates `bytes` in and out for each rank, rank r's on GPU
// rank_devices[r], and fills the inputs with random-looking fp16 bits (never
// zeros, |x| <= 2; read as bf16 they are small finite values), the same on
// every rank.
[[nodiscard]] Status FillInputs(DeviceBuffers& b, size_t bytes,
                                const std::vector<int>& rank_devices);
// FillInputs for ws ranks, rank r on GPU r.
[[nodiscard]] Status FillInputs(DeviceBuffers& b, size_t bytes, int ws);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_GPU_H_
