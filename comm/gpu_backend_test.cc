// GPU backend errors that need no GPU (runs in CI): argument checks and a
// missing device. The data path itself is tested on GPUs by
// tests/gpu/gpu_backend_test.cc.
#include "comm/gpu_backend.h"

#include <gtest/gtest.h>

#include "kernels/platform/gpu_api.h"
#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;

TEST(GpuBackendTest, RejectsBadWorldSizeAndRank) {
  EXPECT_THAT(CreateGpuBackend(0, 0, 3, 1000, 1000).status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateGpuBackend(0, 2, 2, 1000, 1000).status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateGpuBackend(0, -1, 2, 1000, 1000).status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateGpuBackend(0, 0, 2, 0, 1000).status(), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateGpuBackend(0, 0, 2, 1000, 0).status(), StatusIs(StatusCode::kInvalidArgument));
}

TEST(GpuBackendTest, MissingDeviceIsUnavailable) {
  const int n = gpu::DeviceCount();
  EXPECT_THAT(CreateGpuBackend(n, 0, 2, 1000, 1000).status(), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(CreateGpuBackend(-5, 0, 2, 1000, 1000).status(), StatusIs(StatusCode::kUnavailable));
}

}  // namespace
}  // namespace qr
