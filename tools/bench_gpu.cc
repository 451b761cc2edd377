#include "tools/bench_gpu.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/status_macros.h"
#include "kernels/float16.h"
#include "tools/bench_plan.h"

namespace qr::bench {

Status SyncAll(const std::vector<void*>& streams, const std::vector<int>& devices) {
  for (size_t r = 0; r < streams.size(); ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(RankDevice(devices, static_cast<int>(r))));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams[r]));
  }
  return OkStatus();
}

StatusOr<Stopwatch> Stopwatch::Create() {
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_ASSIGN_OR_RETURN(gpu::ScopedEvent start, gpu::ScopedEvent::Create());
  QR_ASSIGN_OR_RETURN(gpu::ScopedEvent stop, gpu::ScopedEvent::Create());
  return Stopwatch(std::move(start), std::move(stop));
}

StatusOr<double> Stopwatch::TimeMs(const std::vector<void*>& streams,
                                   const std::function<Status()>& enqueue) {
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_RETURN_IF_ERROR(gpu::EventRecord(start_.get(), streams[0]));
  QR_RETURN_IF_ERROR(enqueue());
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_RETURN_IF_ERROR(gpu::EventRecord(stop_.get(), streams[0]));
  QR_RETURN_IF_ERROR(SyncAll(streams));
  QR_ASSIGN_OR_RETURN(float ms, gpu::EventElapsedMs(start_.get(), stop_.get()));
  return static_cast<double>(ms);
}

StatusOr<double> TimeBatches(Stopwatch& watch, const std::vector<void*>& streams, int calls,
                             const std::function<Status()>& batch) {
  QR_RETURN_IF_ERROR(batch());  // warm-up
  QR_RETURN_IF_ERROR(SyncAll(streams));
  QR_ASSIGN_OR_RETURN(double probe_ms, watch.TimeMs(streams, batch));
  const int reps = RepsForTarget(probe_ms);
  std::vector<double> samples;
  for (int t = 0; t < kTimedBatches; ++t) {
    QR_ASSIGN_OR_RETURN(double ms, watch.TimeMs(streams, [&]() -> Status {
      for (int i = 0; i < reps; ++i) QR_RETURN_IF_ERROR(batch());
      return OkStatus();
    }));
    samples.push_back(ms * 1000.0 / (static_cast<double>(reps) * calls));
  }
  return Median(samples);
}

int RankDevice(const std::vector<int>& devices, int rank) {
  return devices.empty() ? rank : devices[rank];
}

Status Graphs::Launch(int rank, void* stream) const {
  QR_RETURN_IF_ERROR(gpu::SetDevice(RankDevice(devices, rank)));
  return exec[rank].Launch(stream);
}

Status Graphs::LaunchAll(const std::vector<void*>& streams) const {
  for (size_t r = 0; r < exec.size(); ++r) {
    QR_RETURN_IF_ERROR(Launch(static_cast<int>(r), streams[r]));
  }
  return OkStatus();
}

StatusOr<gpu::ScopedGraph> CaptureStream(int device, void* stream, bool thread_local_mode,
                                         const std::function<Status()>& enqueue) {
  QR_RETURN_IF_ERROR(gpu::SetDevice(device));
  QR_RETURN_IF_ERROR(thread_local_mode ? gpu::BeginCaptureThreadLocal(stream)
                                       : gpu::BeginCapture(stream));
  const Status s = enqueue();
  auto g = gpu::ScopedGraph::EndCapture(stream);
  if (!s.ok()) {
    (void)gpu::LastError("after a failed capture");  // clear what the runtime kept
    return s;
  }
  return g;
}

Status CaptureRank(int rank, void* stream, bool thread_local_mode,
                   const std::function<Status()>& enqueue, Graphs* graphs) {
  QR_ASSIGN_OR_RETURN(graphs->exec[rank], CaptureStream(RankDevice(graphs->devices, rank), stream,
                                                        thread_local_mode, enqueue));
  return OkStatus();
}

StatusOr<GraphTimer> GraphTimer::Create(std::vector<int> devices) {
  std::vector<gpu::ScopedEvent> start, stop;
  for (int device : devices) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(device));
    QR_ASSIGN_OR_RETURN(gpu::ScopedEvent s, gpu::ScopedEvent::Create());
    QR_ASSIGN_OR_RETURN(gpu::ScopedEvent e, gpu::ScopedEvent::Create());
    start.push_back(std::move(s));
    stop.push_back(std::move(e));
  }
  return GraphTimer(std::move(devices), std::move(start), std::move(stop));
}

StatusOr<double> GraphTimer::TimeUs(const std::vector<void*>& streams, int timed, int iters,
                                    int reps, const std::function<Status(int rank)>& enqueue) {
  const int ranks = static_cast<int>(streams.size());
  if (ranks == 0 || ranks > static_cast<int>(devices_.size()) || timed < 1 || timed > ranks ||
      iters < 1 || reps < 1) {
    return InvalidArgumentError("GraphTimer: bad ranks, timed ranks, iterations or repetitions");
  }
  Graphs graphs(std::vector<int>(devices_.begin(), devices_.begin() + ranks));
  for (int r = 0; r < ranks; ++r) {
    QR_RETURN_IF_ERROR(CaptureRank(
        r, streams[r], /*thread_local_mode=*/false,
        [&]() -> Status {
          for (int i = 0; i < iters; ++i) QR_RETURN_IF_ERROR(enqueue(r));
          return OkStatus();
        },
        &graphs));
  }
  std::vector<double> samples;
  for (int rep = 0; rep < reps + 1; ++rep) {
    QR_RETURN_IF_ERROR(SyncAll(streams, devices_));
    for (int r = 0; r < timed; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(devices_[r]));
      QR_RETURN_IF_ERROR(gpu::EventRecord(start_[r].get(), streams[r]));
    }
    QR_RETURN_IF_ERROR(graphs.LaunchAll(streams));
    for (int r = 0; r < timed; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(devices_[r]));
      QR_RETURN_IF_ERROR(gpu::EventRecord(stop_[r].get(), streams[r]));
    }
    double first = 0, last = 0;
    for (int r = 0; r < timed; ++r) {
      QR_RETURN_IF_ERROR(gpu::EventSynchronize(stop_[r].get()));
      QR_ASSIGN_OR_RETURN(float s, gpu::EventElapsedMs(start_[0].get(), start_[r].get()));
      QR_ASSIGN_OR_RETURN(float e, gpu::EventElapsedMs(start_[0].get(), stop_[r].get()));
      first = std::min(first, static_cast<double>(s));
      last = std::max(last, static_cast<double>(e));
    }
    if (rep > 0) samples.push_back((last - first) * 1000.0 / iters);
  }
  QR_RETURN_IF_ERROR(SyncAll(streams, devices_));
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// A 16 MiB pattern of xorshift64 bits, tiled.
Status FillInputs(DeviceBuffers& b, size_t bytes, const std::vector<int>& rank_devices) {
  const size_t pat_elems = 8u << 20;
  std::vector<uint16_t> pat(pat_elems);
  uint64_t x = 88172645463325252ull;
  for (auto& v : pat) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = kernels::FloatToHalf((static_cast<float>(x >> 40) / 16777216.0f - 0.5f) * 4.0f);
  }
  b.in.clear();
  b.out.clear();
  for (size_t r = 0; r < rank_devices.size(); ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(rank_devices[r]));
    QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer in, gpu::DeviceBuffer::Malloc(bytes));
    QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Malloc(bytes));
    b.in.push_back(std::move(in));
    b.out.push_back(std::move(out));
    for (size_t off = 0; off < bytes; off += pat_elems * 2) {
      QR_RETURN_IF_ERROR(
          gpu::Memcpy(b.in[r].as<char>() + off, pat.data(), std::min(pat_elems * 2, bytes - off)));
    }
  }
  return OkStatus();
}

Status FillInputs(DeviceBuffers& b, size_t bytes, int ws) {
  std::vector<int> devices(ws);
  for (int r = 0; r < ws; ++r) devices[r] = r;
  return FillInputs(b, bytes, devices);
}

}  // namespace qr::bench
