// The host-only flavour (./bazelw without nvcc, or --config=host): joining
// with a GPU device is QR_UNSUPPORTED and says why, and the GPU runtime
// layer reports no devices. Runs only in that flavour (HOST_ONLY).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "comm/quickreduce.h"
#include "kernels/platform/gpu_api.h"
#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

TEST(HostOnlyTest, JoinOnAGpuIsUnsupportedAndSaysWhy) {
  for (int device : {0, 3}) {
    qr_join_options o = {};
    o.group = "host-only-test";
    o.rank = 0;
    o.world_size = 2;
    o.device = device;
    o.timeout_ms = 1000;
    qr_comm* comm = reinterpret_cast<qr_comm*>(1);
    EXPECT_EQ(qr_join(&o, &comm), QR_UNSUPPORTED) << "device " << device;
    EXPECT_EQ(comm, nullptr);
    EXPECT_THAT(qr_last_error(), HasSubstr("built without GPU support"));
    EXPECT_THAT(qr_last_error(), HasSubstr("GPU " + std::to_string(device)));
  }
}

TEST(HostOnlyTest, BadArgumentsAreStillInvalidBeforeTheDevice) {
  qr_join_options o = {};
  o.group = "host-only-test";
  o.rank = 2;
  o.world_size = 2;
  o.device = 0;
  qr_comm* comm = nullptr;
  EXPECT_EQ(qr_join(&o, &comm), QR_INVALID_ARGUMENT);
  EXPECT_THAT(qr_last_error(), HasSubstr("rank 2"));
}

TEST(HostOnlyTest, GpuRuntimeHasNoDevices) {
  EXPECT_EQ(gpu::DeviceCount(), 0);
  EXPECT_THAT(gpu::SetDevice(0), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(gpu::Malloc(64).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("built without GPU support")));
}

}  // namespace
}  // namespace qr
