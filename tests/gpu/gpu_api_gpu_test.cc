// gpu_api.h's owners on a GPU: what they hold works, and what they release
// is released (an allocation loop larger than the GPU, a second registration
// of the same page, the previous device restored). The moves are checked
// without a GPU by kernels/platform/gpu_api_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/platform/gpu_api.h"
#include "tests/util/status_matchers.h"

namespace qr::gpu {
namespace {

class GpuApiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "needs a GPU, found none";
    ASSERT_OK(SetDevice(0));
  }
};

TEST_F(GpuApiGpuTest, DeviceBufferHoldsWhatWasWritten) {
  ASSERT_OK_AND_ASSIGN(DeviceBuffer b, DeviceBuffer::MallocShared(1 << 20));
  EXPECT_EQ(b.bytes(), size_t{1} << 20);
  EXPECT_EQ(b.device(), 0);
  std::vector<uint32_t> in(1 << 18), out(1 << 18);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint32_t>(i * 2654435761u);
  ASSERT_OK(Memcpy(b.get(), in.data(), b.bytes()));
  DeviceBuffer moved = std::move(b);
  ASSERT_OK(Memcpy(out.data(), moved.get(), moved.bytes()));
  EXPECT_EQ(in, out);
}

// 64 x 4 GiB is more than any GPU holds: a buffer that is not freed makes an
// allocation fail.
TEST_F(GpuApiGpuTest, DeviceBufferFreesWhenItGoes) {
  for (int i = 0; i < 64; ++i) {
    auto b = DeviceBuffer::Malloc(size_t{4} << 30);
    ASSERT_TRUE(b.ok()) << "round " << i << ": " << b.status();
  }
}

TEST_F(GpuApiGpuTest, MappedHostBufferIsSharedWithTheDevice) {
  ASSERT_OK_AND_ASSIGN(MappedHostBuffer m, MappedHostBuffer::Create(4096));
  ASSERT_NE(m.device(), nullptr);
  EXPECT_EQ(static_cast<const uint32_t*>(m.host())[7], 0u);  // zeroed
  const uint32_t want = 0x12345678u;
  ASSERT_OK(Memcpy(m.device(), &want, sizeof(want)));
  EXPECT_EQ(static_cast<const uint32_t*>(m.host())[0], want);
}

// Registering a page that is still registered fails, so the second round
// proves the first registration was undone.
TEST_F(GpuApiGpuTest, HostRegistrationIsUndoneWhenItGoes) {
  std::unique_ptr<void, decltype(&std::free)> page(std::aligned_alloc(4096, 4096), &std::free);
  ASSERT_NE(page, nullptr);
  std::memset(page.get(), 0, 4096);
  for (int round = 0; round < 2; ++round) {
    ASSERT_OK_AND_ASSIGN(HostRegistration r, HostRegistration::Create(page.get(), 4096));
    const uint32_t want = 40 + round;
    ASSERT_OK(Memcpy(r.device(), &want, sizeof(want)));
    EXPECT_EQ(*static_cast<const uint32_t*>(page.get()), want) << "round " << round;
  }
}

TEST_F(GpuApiGpuTest, StreamEventsAndGraphWork) {
  ASSERT_OK_AND_ASSIGN(ScopedStream stream, ScopedStream::Create());
  ASSERT_OK_AND_ASSIGN(ScopedEvent start, ScopedEvent::Create());
  ASSERT_OK_AND_ASSIGN(ScopedEvent stop, ScopedEvent::Create());
  ASSERT_OK_AND_ASSIGN(DeviceBuffer b, DeviceBuffer::Malloc(1 << 20));
  ASSERT_OK(BeginCapture(stream.get()));
  ASSERT_OK(MemsetAsync(b.get(), 7, b.bytes(), stream.get()));
  ASSERT_OK_AND_ASSIGN(ScopedGraph graph, ScopedGraph::EndCapture(stream.get()));
  EXPECT_EQ(graph.nodes(), 1u);  // the memset
  ASSERT_OK(Memset(b.get(), 0, b.bytes()));
  ASSERT_OK(EventRecord(start.get(), stream.get()));
  ASSERT_OK(graph.Launch(stream.get()));
  ASSERT_OK(EventRecord(stop.get(), stream.get()));
  ASSERT_OK(StreamSynchronize(stream.get()));
  ASSERT_OK_AND_ASSIGN(float ms, EventElapsedMs(start.get(), stop.get()));
  EXPECT_GE(ms, 0.0f);
  std::vector<uint8_t> got(b.bytes());
  ASSERT_OK(Memcpy(got.data(), b.get(), b.bytes()));
  EXPECT_EQ(got, std::vector<uint8_t>(b.bytes(), 7));
}

// qr-bench checks every captured graph for nodes: an empty capture reads 0.
TEST_F(GpuApiGpuTest, AnEmptyCaptureHasNoNodes) {
  ASSERT_OK_AND_ASSIGN(ScopedStream stream, ScopedStream::Create());
  ASSERT_OK(BeginCapture(stream.get()));
  ASSERT_OK_AND_ASSIGN(ScopedGraph graph, ScopedGraph::EndCapture(stream.get()));
  EXPECT_EQ(graph.nodes(), 0u);
}

TEST_F(GpuApiGpuTest, ScopedDeviceRestoresThePreviousDevice) {
  const int last = DeviceCount() - 1;
  {
    ASSERT_OK_AND_ASSIGN(ScopedDevice on, ScopedDevice::Set(last));
    ASSERT_OK_AND_ASSIGN(int now, GetDevice());
    EXPECT_EQ(now, last);
    ScopedDevice moved(std::move(on));  // restores once, when it goes
  }
  ASSERT_OK_AND_ASSIGN(int after, GetDevice());
  EXPECT_EQ(after, 0);
  // An owner made on `last` releases there and leaves device 0 current.
  {
    ASSERT_OK(SetDevice(last));
    ASSERT_OK_AND_ASSIGN(DeviceBuffer b, DeviceBuffer::Malloc(4096));
    ASSERT_OK(SetDevice(0));
    EXPECT_EQ(b.device(), last);
  }
  ASSERT_OK_AND_ASSIGN(after, GetDevice());
  EXPECT_EQ(after, 0);
}

}  // namespace
}  // namespace qr::gpu
