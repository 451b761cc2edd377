// Helpers of the GPU tests that drive a LocalGroup (kernels/gpu/local_group.h):
// the GPUs to spread ranks over, device buffers freed on their device, the
// name of a (world size, format) case, and waiting for a rank's stream after its waiting kernel was
// stopped (the abort word, a wait's timeout).
#ifndef QR_TESTS_GPU_LOCAL_GROUP_TEST_UTIL_H_
#define QR_TESTS_GPU_LOCAL_GROUP_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <tuple>

#include "kernels/gpu/local_group.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/types.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {

// GPUs the tests spread their ranks over: at most two.
inline int TestGpus() { return std::min(gpu::DeviceCount(), 2); }

// One device allocation, freed on its device. Kept in a deque: growing it
// never copies an element (a copy would free twice).
struct DeviceVec {
  DeviceVec() = default;
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  int device = 0;
  void* p = nullptr;
  ~DeviceVec() {
    if (p == nullptr) return;
    (void)gpu::SetDevice(device);
    gpu::Free(p);
  }
};

// `bytes` on `device`, every byte `fill`, owned by *keep; nullptr (and a
// test failure) when the allocation fails. Leaves `device` current.
inline void* AllocFilled(int device, size_t bytes, uint8_t fill, std::deque<DeviceVec>* keep) {
  EXPECT_OK(gpu::SetDevice(device));
  auto m = gpu::Malloc(bytes);
  EXPECT_OK(m.status());
  keep->emplace_back();
  keep->back().device = device;
  keep->back().p = m.ok() ? *m : nullptr;
  if (m.ok()) EXPECT_OK(gpu::Memset(*m, fill, bytes));
  return keep->back().p;
}

// The name of a (world size, work format) test case: "ws4_bf16".
inline std::string WorldSizeAndFormatName(
    const ::testing::TestParamInfo<std::tuple<int, WorkFormat>>& info) {
  return "ws" + std::to_string(std::get<0>(info.param)) + "_" +
         WorkFormatName(std::get<1>(info.param));
}

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

#endif  // QR_TESTS_GPU_LOCAL_GROUP_TEST_UTIL_H_
