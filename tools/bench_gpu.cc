#include "tools/bench_gpu.h"

#include <algorithm>
#include <cstdint>

#include "common/status_macros.h"
#include "kernels/float16.h"
#include "tools/bench_plan.h"

namespace qr::bench {

Status SyncAll(const std::vector<void*>& streams) {
  for (size_t r = 0; r < streams.size(); ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(static_cast<int>(r)));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams[r]));
  }
  return OkStatus();
}

StatusOr<Stopwatch> Stopwatch::Create() {
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  Stopwatch w;
  QR_ASSIGN_OR_RETURN(w.start_, gpu::EventCreate());
  QR_ASSIGN_OR_RETURN(w.stop_, gpu::EventCreate());
  return w;
}

Stopwatch::~Stopwatch() {
  if (start_ == nullptr) return;
  if (gpu::SetDevice(0).ok()) {
    gpu::EventDestroy(start_);
    gpu::EventDestroy(stop_);
  }
}

StatusOr<double> Stopwatch::TimeMs(const std::vector<void*>& streams,
                                   const std::function<Status()>& enqueue) {
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_RETURN_IF_ERROR(gpu::EventRecord(start_, streams[0]));
  QR_RETURN_IF_ERROR(enqueue());
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_RETURN_IF_ERROR(gpu::EventRecord(stop_, streams[0]));
  QR_RETURN_IF_ERROR(SyncAll(streams));
  QR_ASSIGN_OR_RETURN(float ms, gpu::EventElapsedMs(start_, stop_));
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

Graphs::~Graphs() {
  for (size_t r = 0; r < exec.size(); ++r) {
    if (exec[r] != nullptr && gpu::SetDevice(static_cast<int>(r)).ok()) gpu::GraphDestroy(exec[r]);
  }
}

Status Graphs::LaunchAll(const std::vector<void*>& streams) const {
  for (size_t r = 0; r < exec.size(); ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(static_cast<int>(r)));
    QR_RETURN_IF_ERROR(gpu::GraphLaunch(exec[r], streams[r]));
  }
  return OkStatus();
}

Status CaptureRank(int rank, void* stream, bool thread_local_mode,
                   const std::function<Status()>& enqueue, Graphs* graphs) {
  QR_RETURN_IF_ERROR(gpu::SetDevice(rank));
  QR_RETURN_IF_ERROR(thread_local_mode ? gpu::BeginCaptureThreadLocal(stream)
                                       : gpu::BeginCapture(stream));
  const Status s = enqueue();
  auto g = gpu::EndCapture(stream);
  if (!s.ok()) {
    if (g.ok()) gpu::GraphDestroy(*g);
    (void)gpu::LastError("after a failed capture");  // clear what the runtime kept
    return s;
  }
  QR_RETURN_IF_ERROR(g.status());
  graphs->exec[rank] = *g;
  return OkStatus();
}

DeviceBuffers::~DeviceBuffers() {
  for (size_t r = 0; r < in.size(); ++r) {
    if (!gpu::SetDevice(static_cast<int>(r)).ok()) continue;
    gpu::Free(in[r]);
    gpu::Free(out[r]);
  }
}

// A 16 MiB pattern of xorshift64 bits, tiled.
Status FillInputs(DeviceBuffers& b, size_t bytes, int ws) {
  const size_t pat_elems = 8u << 20;
  std::vector<uint16_t> pat(pat_elems);
  uint64_t x = 88172645463325252ull;
  for (auto& v : pat) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = kernels::FloatToHalf((static_cast<float>(x >> 40) / 16777216.0f - 0.5f) * 4.0f);
  }
  b.in.assign(ws, nullptr);
  b.out.assign(ws, nullptr);
  for (int r = 0; r < ws; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(r));
    QR_ASSIGN_OR_RETURN(b.in[r], gpu::Malloc(bytes));
    QR_ASSIGN_OR_RETURN(b.out[r], gpu::Malloc(bytes));
    for (size_t off = 0; off < bytes; off += pat_elems * 2) {
      QR_RETURN_IF_ERROR(gpu::Memcpy(static_cast<char*>(b.in[r]) + off, pat.data(),
                                     std::min(pat_elems * 2, bytes - off)));
    }
  }
  return OkStatus();
}

}  // namespace qr::bench
