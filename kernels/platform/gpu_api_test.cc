// The owners of gpu_api.h without a GPU: what moving does to ownership, and
// that every factory fails cleanly where there is no GPU (kUnavailable in the
// host-only flavour, which has no runtime). tests/gpu/gpu_api_test.cc runs
// them on a GPU.
#include "kernels/platform/gpu_api.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "tests/util/status_matchers.h"

namespace qr::gpu {
namespace {

using ::qr::testing::StatusIs;

std::vector<std::pair<void*, int>> released;
void Record(void* object, int device) { released.emplace_back(object, device); }
using Counted = internal::Owned<Record>;

int a = 0, b = 0;  // their addresses stand for runtime objects

TEST(OwnedTest, ReleasesOnceOnTheDeviceItWasCreatedOn) {
  released.clear();
  { Counted owned(&a, 3); }
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], std::make_pair(static_cast<void*>(&a), 3));
}

TEST(OwnedTest, MovingHandsOverWithoutReleasing) {
  released.clear();
  Counted first(&a, 1);
  Counted second(std::move(first));
  EXPECT_EQ(first.get(), nullptr);  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(second.get(), &a);
  EXPECT_EQ(second.device(), 1);
  EXPECT_TRUE(released.empty());
  Counted third;
  third = std::move(second);
  EXPECT_TRUE(released.empty());
  third.Reset();
  third.Reset();
  EXPECT_EQ(released.size(), 1u);
}

TEST(OwnedTest, MoveAssignmentReleasesWhatItHeld) {
  released.clear();
  Counted held(&a, 0);
  Counted incoming(&b, 2);
  held = std::move(incoming);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].first, &a);
  EXPECT_EQ(held.get(), &b);
  held = std::move(held);  // self-move keeps it
  EXPECT_EQ(held.get(), &b);
  EXPECT_EQ(released.size(), 1u);
}

TEST(OwnersTest, DefaultConstructedAndMovedFromAreEmpty) {
  DeviceBuffer buffer;
  EXPECT_EQ(buffer.get(), nullptr);
  EXPECT_EQ(buffer.bytes(), 0u);
  DeviceBuffer moved(std::move(buffer));
  EXPECT_EQ(moved.get(), nullptr);
  EXPECT_EQ(MappedHostBuffer().host(), nullptr);
  EXPECT_EQ(MappedHostBuffer().device(), nullptr);
  EXPECT_EQ(HostRegistration().device(), nullptr);
  EXPECT_EQ(IpcMapping().get(), nullptr);
  EXPECT_EQ(ScopedStream().get(), nullptr);
  EXPECT_EQ(ScopedEvent().get(), nullptr);
  EXPECT_EQ(ScopedGraph().get(), nullptr);
}

TEST(OwnersTest, ScopedDeviceRefusesADeviceThatDoesNotExist) {
  EXPECT_THAT(ScopedDevice::Set(DeviceCount()).status(), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(ScopedDevice::Set(-1).status(), StatusIs(StatusCode::kUnavailable));
}

TEST(OwnersTest, FactoriesFailWithoutAGpu) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a GPU is present (tests/gpu/gpu_api_test covers it)";
#ifdef QR_HOST_ONLY_FLAVOUR
  const StatusCode want = StatusCode::kUnavailable;
#else
  // No driver or no device: the runtime's own error (kInternal or kUnavailable).
  const StatusCode want = DeviceBuffer::Malloc(64).status().code();
  EXPECT_NE(want, StatusCode::kOk);
#endif
  alignas(4096) static char page[4096];
  EXPECT_THAT(DeviceBuffer::Malloc(64).status(), StatusIs(want));
  EXPECT_THAT(DeviceBuffer::MallocShared(64).status(), StatusIs(want));
  EXPECT_FALSE(MappedHostBuffer::Create(4096).ok());
  EXPECT_FALSE(HostRegistration::Create(page, sizeof(page)).ok());
  EXPECT_FALSE(IpcMapping::Open(IpcHandle{}).ok());
  EXPECT_THAT(ScopedStream::Create().status(), StatusIs(want));
  EXPECT_THAT(ScopedEvent::Create().status(), StatusIs(want));
  EXPECT_FALSE(ScopedGraph::EndCapture(nullptr).ok());
  EXPECT_THAT(ScopedDevice::Set(0).status(), StatusIs(StatusCode::kUnavailable));
}

}  // namespace
}  // namespace qr::gpu
