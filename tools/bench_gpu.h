// qr-bench's GPU plumbing over the neutral runtime API
// (kernels/platform/gpu_api.h): one stream per rank, GPU r for rank r. A
// stopwatch of events on rank 0's stream, the batch timing method of
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

// Waits for every rank's stream.
[[nodiscard]] Status SyncAll(const std::vector<void*>& streams);

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

// One captured graph per rank (empty until CaptureRank fills it).
struct Graphs {
  explicit Graphs(int ranks) : exec(ranks) {}
  std::vector<gpu::ScopedGraph> exec;
  // Replays every rank's graph on its stream.
  [[nodiscard]] Status LaunchAll(const std::vector<void*>& streams) const;
};

// Captures enqueue() on `stream` of GPU `device` into a graph (in the
// thread-local capture mode when other threads capture at the same time); a
// failure inside the capture still ends it, so the stream stays usable.
[[nodiscard]] StatusOr<gpu::ScopedGraph> CaptureStream(int device, void* stream,
                                                       bool thread_local_mode,
                                                       const std::function<Status()>& enqueue);
// CaptureStream on rank's stream (rank r on GPU r) into graphs->exec[rank].
[[nodiscard]] Status CaptureRank(int rank, void* stream, bool thread_local_mode,
                                 const std::function<Status()>& enqueue, Graphs* graphs);

// One input and one output buffer per rank (rank r's on GPU r).
struct DeviceBuffers {
  std::vector<gpu::DeviceBuffer> in, out;
};

// Allocates `bytes` in and out on each of ws ranks and fills the inputs with
// random-looking fp16 bits (never zeros, |x| <= 2; read as bf16 they are
// small finite values).
[[nodiscard]] Status FillInputs(DeviceBuffers& b, size_t bytes, int ws);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_GPU_H_
