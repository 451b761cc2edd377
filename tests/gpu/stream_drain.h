// Waiting for a rank's stream in the GPU tests whose kernels are stopped
// while they wait for a peer (the abort word, a wait's timeout).
#ifndef QR_TESTS_GPU_STREAM_DRAIN_H_
#define QR_TESTS_GPU_STREAM_DRAIN_H_

#include <chrono>
#include <thread>

#include "kernels/gpu/local_group.h"
#include "kernels/platform/gpu_api.h"

namespace qr::kernels {

// Polls until rank's stream is idle or `limit` passes; returns the time taken.
inline double DrainSeconds(LocalGroup& g, int rank, double limit) {
  const auto start = std::chrono::steady_clock::now();
  (void)gpu::SetDevice(g.device(rank));
  for (;;) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto done = gpu::StreamDone(g.stream(rank));
    if ((done.ok() && *done) || s > limit) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace qr::kernels

#endif  // QR_TESTS_GPU_STREAM_DRAIN_H_
