#include "kernels/platform/platform.h"

#include <gtest/gtest.h>

#include <string>

namespace qr {
namespace {

TEST(PlatformTest, Names) {
  EXPECT_STREQ(PlatformName(Platform::kHost), "host");
  EXPECT_STREQ(PlatformName(Platform::kNvidia), "NVIDIA");
  EXPECT_STREQ(PlatformName(Platform::kAmd), "AMD");
  EXPECT_STREQ(PlatformName(static_cast<Platform>(7)), "?");
}

// The test is built with the same flavour as the library: its expectation
// comes from the Bazel flavour too (BUILD passes it), not from the code under
// test.
TEST(PlatformTest, GpuPlatformIsTheBuildFlavour) {
  EXPECT_STREQ(PlatformName(GpuPlatform()), QR_EXPECTED_GPU_PLATFORM);
}

// Clusters exist in the NVIDIA build only (its kernels target sm_90).
TEST(PlatformTest, BlockClustersOnNvidiaOnly) {
  EXPECT_EQ(GpuBlockClusters(), std::string(QR_EXPECTED_GPU_PLATFORM) == "NVIDIA");
}

}  // namespace
}  // namespace qr
