#include "kernels/sample_scale.h"

#include <vector>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;

// Runs everywhere: without a GPU the call must fail cleanly, with one it must
// compute the right numbers.
TEST(SampleScaleTest, ScalesOnGpuOrReportsNoGpu) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Status s = SampleScaleOnGpu(v.data(), v.size(), 2.0f);
  if (SampleGpuCount() == 0) {
    EXPECT_THAT(s, StatusIs(StatusCode::kUnavailable));
    EXPECT_EQ(v[3], 3.0f);
    return;
  }
  ASSERT_OK(s);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 2.0f * i);
}

}  // namespace
}  // namespace qr::kernels
