// The peer-store kernels on a GPU (kernels/gpu/peer_bandwidth.h): every
// byte each method writes equals PeerStorePatternWord's pattern, nothing is
// written past bytes_per_dst, for sizes that are not multiples of the TMA
// chunk, grids from one block (which reuses both shared buffers many times)
// to two per multiprocessor, one and two destinations; inside a captured
// graph; into another process's allocation through its IPC mapping (the
// child is this binary, started with --peer-store-child); and into GPU 1
// through peer access where there are two GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "common/subprocess.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/platform/gpu_api.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using kernels::LaunchPeerStore;
using kernels::PeerStoreArgs;
using kernels::PeerStoreMethod;

constexpr size_t kKiB = 1024;
constexpr size_t kGuardBytes = 4096;  // after each destination, must stay untouched
constexpr uint8_t kGuard = 0xA5;
constexpr const char* kChildFlag = "--peer-store-child=";

struct Method {
  PeerStoreMethod method;
  size_t chunk_bytes;
};

std::string Name(const Method& m) {
  if (m.method == PeerStoreMethod::kSmStores) return "sm";
  return "tma/" + std::to_string(m.chunk_bytes);
}

// The TMA chunk sizes qr-kernel-cost times, the extremes of the valid range,
// and one that is no power of two.
std::vector<Method> Methods() {
  std::vector<Method> m = {{PeerStoreMethod::kSmStores, 0}};
  if (!kernels::PeerStoreMethodAvailable(PeerStoreMethod::kTmaBulk)) return m;
  for (size_t c :
       {size_t{16}, 4 * kKiB, 8 * kKiB, 16 * kKiB + 16, 16 * kKiB, 32 * kKiB, 64 * kKiB}) {
    m.push_back({PeerStoreMethod::kTmaBulk, c});
  }
  return m;
}

// The first byte of dst[0, bytes) that differs from the pattern, or of
// [bytes, bytes + kGuardBytes) that is not kGuard.
::testing::AssertionResult HoldsPattern(const void* device, size_t bytes) {
  std::vector<uint32_t> got((bytes + kGuardBytes) / 4);
  if (const Status s = gpu::Memcpy(got.data(), device, bytes + kGuardBytes); !s.ok()) {
    return ::testing::AssertionFailure() << s.ToString();
  }
  for (size_t w = 0; w < bytes / 4; ++w) {
    const uint32_t want = kernels::PeerStorePatternWord(w / 4, static_cast<int>(w % 4));
    if (got[w] != want) {
      return ::testing::AssertionFailure()
             << "byte " << w * 4 << " of " << bytes << ": word " << got[w] << ", want " << want;
    }
  }
  const uint8_t* tail = reinterpret_cast<const uint8_t*>(got.data()) + bytes;
  for (size_t b = 0; b < kGuardBytes; ++b) {
    if (tail[b] != kGuard) {
      return ::testing::AssertionFailure()
             << "byte " << bytes + b << " past the end was written (" << int{tail[b]} << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

class PeerStoreGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::DeviceCount() == 0) GTEST_SKIP() << "needs a GPU, found none";
    ASSERT_OK(gpu::SetDevice(0));
    ASSERT_OK_AND_ASSIGN(const int sms, gpu::MultiprocessorCount(0));
    sms_ = sms;
    ASSERT_OK_AND_ASSIGN(stream_, gpu::ScopedStream::Create());
  }

  // A destination of `bytes` plus the guard, every byte kGuard.
  StatusOr<gpu::DeviceBuffer> Destination(size_t bytes) {
    QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::MallocShared(bytes + kGuardBytes));
    QR_RETURN_IF_ERROR(gpu::Memset(b.get(), kGuard, bytes + kGuardBytes));
    return b;
  }

  int sms_ = 0;
  gpu::ScopedStream stream_;
};

TEST_F(PeerStoreGpuTest, EveryMethodWritesThePatternAndNothingElse) {
  for (const Method& m : Methods()) {
    const size_t chunk = m.chunk_bytes > 0 ? m.chunk_bytes : 16 * kKiB;
    // Below one chunk, one chunk and a vector, three and a bit, and large
    // sizes with a short last chunk.
    for (size_t bytes : {size_t{16}, std::max(chunk - 16, size_t{16}), chunk + 16, 3 * chunk + 48,
                         (size_t{1} << 20) + 16 * 37, (size_t{64} << 20) + 4 * kKiB + 16}) {
      for (int num_dst : {1, 2}) {
        for (int blocks : {num_dst, 3 * num_dst, 2 * sms_}) {
          // 64 MiB through a block or three is seconds of 16-byte copies.
          if (bytes > (size_t{1} << 20) + 16 * 37 && blocks < sms_) continue;
          SCOPED_TRACE(Name(m) + " bytes " + std::to_string(bytes) + " dsts " +
                       std::to_string(num_dst) + " blocks " + std::to_string(blocks));
          std::vector<gpu::DeviceBuffer> dst;
          PeerStoreArgs a;
          for (int d = 0; d < num_dst; ++d) {
            ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer b, Destination(bytes));
            a.dst[d] = b.get();
            dst.push_back(std::move(b));
          }
          a.num_dst = num_dst;
          a.bytes_per_dst = bytes;
          a.blocks = blocks;
          a.stream = stream_.get();
          a.method = m.method;
          a.chunk_bytes = m.chunk_bytes;
          ASSERT_OK(LaunchPeerStore(a));
          ASSERT_OK(gpu::StreamSynchronize(stream_.get()));
          for (int d = 0; d < num_dst; ++d) EXPECT_TRUE(HoldsPattern(dst[d].get(), bytes)) << d;
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Captured once (64 KiB chunks: 128 KiB of shared memory per block) and
// replayed onto a wiped buffer; run alone, its launch is also the one that
// raises the kernel's shared memory limit while the stream is captured.
TEST_F(PeerStoreGpuTest, TmaLaunchWorksInsideACapturedGraph) {
  if (!kernels::PeerStoreMethodAvailable(PeerStoreMethod::kTmaBulk)) {
    GTEST_SKIP() << "no TMA bulk copies on this platform";
  }
  const size_t bytes = (size_t{8} << 20) + 16 * 5;
  ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer dst, Destination(bytes));
  PeerStoreArgs a;
  a.dst[0] = dst.get();
  a.num_dst = 1;
  a.bytes_per_dst = bytes;
  a.blocks = sms_;
  a.stream = stream_.get();
  a.method = PeerStoreMethod::kTmaBulk;
  a.chunk_bytes = 64 * kKiB;
  ASSERT_OK(gpu::BeginCapture(stream_.get()));
  ASSERT_OK(LaunchPeerStore(a));
  ASSERT_OK_AND_ASSIGN(gpu::ScopedGraph graph, gpu::ScopedGraph::EndCapture(stream_.get()));
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_OK(gpu::Memset(dst.get(), kGuard, bytes + kGuardBytes));
    ASSERT_OK(graph.Launch(stream_.get()));
    ASSERT_OK(gpu::StreamSynchronize(stream_.get()));
    EXPECT_TRUE(HoldsPattern(dst.get(), bytes)) << "replay " << replay;
  }
}

std::string Hex(const gpu::IpcHandle& h) {
  std::string s;
  char byte[3];
  for (uint8_t b : h) {
    std::snprintf(byte, sizeof(byte), "%02x", b);
    s += byte;
  }
  return s;
}

// What a rank of a real group does: it writes into a peer process's receive
// buffer through the IPC mapping it opened (both on GPU 0 here; on two GPUs
// the mapping crosses NVLink, which qr-bench measures).
TEST_F(PeerStoreGpuTest, EveryMethodWritesIntoAnotherProcesssAllocation) {
  const size_t bytes = (size_t{4} << 20) + 8 * kKiB + 16 * 3;
  for (const Method& m : Methods()) {
    SCOPED_TRACE(Name(m));
    ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer dst, Destination(bytes));
    ASSERT_OK_AND_ASSIGN(gpu::IpcHandle handle, gpu::IpcGetHandle(dst.get()));
    const std::string arg = std::string(kChildFlag) + Hex(handle) + ":" + std::to_string(bytes) +
                            ":" + std::to_string(static_cast<int>(m.method)) + ":" +
                            std::to_string(m.chunk_bytes) + ":" + std::to_string(2 * sms_);
    ASSERT_OK_AND_ASSIGN(const pid_t child, Spawn({"/proc/self/exe", arg}));
    ASSERT_OK_AND_ASSIGN(const int code, WaitExit(child, std::chrono::seconds(60)));
    ASSERT_EQ(code, 0) << "the writing process failed (its stderr is above)";
    EXPECT_TRUE(HoldsPattern(dst.get(), bytes));
  }
}

TEST_F(PeerStoreGpuTest, EveryMethodWritesIntoThePeerGpu) {
  if (gpu::DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpu::DeviceCount();
  ASSERT_OK_AND_ASSIGN(const bool can, gpu::CanAccessPeer(0, 1));
  if (!can) GTEST_SKIP() << "GPU 0 cannot access GPU 1";
  ASSERT_OK(gpu::EnablePeerAccess(1));
  const size_t bytes = (size_t{16} << 20) + 16 * 7;
  for (const Method& m : Methods()) {
    SCOPED_TRACE(Name(m));
    ASSERT_OK(gpu::SetDevice(1));
    ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer dst, Destination(bytes));
    ASSERT_OK(gpu::SetDevice(0));
    PeerStoreArgs a;
    a.dst[0] = dst.get();
    a.num_dst = 1;
    a.bytes_per_dst = bytes;
    a.blocks = 2 * sms_;
    a.stream = stream_.get();
    a.method = m.method;
    a.chunk_bytes = m.chunk_bytes;
    ASSERT_OK(LaunchPeerStore(a));
    ASSERT_OK(gpu::StreamSynchronize(stream_.get()));
    EXPECT_TRUE(HoldsPattern(dst.get(), bytes));
  }
}

// The child of EveryMethodWritesIntoAnotherProcesssAllocation:
// <handle hex>:<bytes>:<method>:<chunk bytes>:<blocks>.
int ChildMain(const std::string& spec) {
  gpu::IpcHandle handle{};
  size_t bytes = 0, chunk = 0;
  int method = 0, blocks = 0;
  const size_t colon = spec.find(':');
  if (colon != 2 * handle.size() ||
      std::sscanf(spec.c_str() + colon, ":%zu:%d:%zu:%d", &bytes, &method, &chunk, &blocks) != 4) {
    std::fprintf(stderr, "child: bad spec %s\n", spec.c_str());
    return 2;
  }
  for (size_t i = 0; i < handle.size(); ++i) {
    unsigned v = 0;
    std::sscanf(spec.c_str() + 2 * i, "%2x", &v);
    handle[i] = static_cast<uint8_t>(v);
  }
  auto run = [&]() -> Status {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_ASSIGN_OR_RETURN(gpu::IpcMapping mapping, gpu::IpcMapping::Open(handle));
    QR_ASSIGN_OR_RETURN(gpu::ScopedStream stream, gpu::ScopedStream::Create());
    PeerStoreArgs a;
    a.dst[0] = mapping.get();
    a.num_dst = 1;
    a.bytes_per_dst = bytes;
    a.blocks = blocks;
    a.stream = stream.get();
    a.method = static_cast<PeerStoreMethod>(method);
    a.chunk_bytes = chunk;
    QR_RETURN_IF_ERROR(LaunchPeerStore(a));
    return gpu::StreamSynchronize(stream.get());
  };
  const Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "child: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  const std::string flag = qr::testing::kChildFlag;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(flag, 0) == 0) return qr::testing::ChildMain(a.substr(flag.size()));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
