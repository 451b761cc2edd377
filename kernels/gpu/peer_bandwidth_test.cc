// The peer-store launcher's argument checks, which come before any GPU call
// (no GPU needed; runs in CI). The destinations below are never written:
// every case that reaches LaunchPeerStore stops at a check.
#include "kernels/gpu/peer_bandwidth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/platform/platform.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

alignas(16) char destinations[2][64];

PeerStoreArgs Args(PeerStoreMethod method, size_t chunk_bytes) {
  PeerStoreArgs a;
  a.dst[0] = destinations[0];
  a.dst[1] = destinations[1];
  a.num_dst = 2;
  a.bytes_per_dst = 64;
  a.blocks = 4;
  a.method = method;
  a.chunk_bytes = chunk_bytes;
  return a;
}

bool TmaBuilt() { return GpuPlatform() == Platform::kNvidia; }

TEST(PeerStoreTest, MethodsHaveNames) {
  EXPECT_STREQ(PeerStoreMethodName(PeerStoreMethod::kSmStores), "sm");
  EXPECT_STREQ(PeerStoreMethodName(PeerStoreMethod::kTmaBulk), "tma");
  EXPECT_STREQ(PeerStoreMethodName(static_cast<PeerStoreMethod>(7)), "?");
  EXPECT_TRUE(PeerStoreMethodAvailable(PeerStoreMethod::kSmStores));
  EXPECT_EQ(PeerStoreMethodAvailable(PeerStoreMethod::kTmaBulk), TmaBuilt());
  EXPECT_FALSE(PeerStoreMethodAvailable(static_cast<PeerStoreMethod>(7)));
}

TEST(PeerStoreTest, AcceptsEveryChunkSizeInRange) {
  EXPECT_OK(ValidatePeerStoreArgs(Args(PeerStoreMethod::kSmStores, 0)));
  // The SM stores ignore chunk_bytes.
  EXPECT_OK(ValidatePeerStoreArgs(Args(PeerStoreMethod::kSmStores, 3)));
  for (size_t chunk : {size_t{16}, size_t{48}, size_t{4096}, size_t{4096 + 16}, size_t{8} << 10,
                       size_t{16} << 10, size_t{32} << 10, size_t{64} << 10}) {
    SCOPED_TRACE(chunk);
    const Status s = ValidatePeerStoreArgs(Args(PeerStoreMethod::kTmaBulk, chunk));
    if (TmaBuilt()) {
      EXPECT_OK(s);
    } else {
      EXPECT_THAT(s, StatusIs(StatusCode::kUnsupported, HasSubstr("NVIDIA sm_90 only"))) << chunk;
    }
  }
}

TEST(PeerStoreTest, RejectsBadChunkSizes) {
  for (size_t chunk : {size_t{0}, size_t{8}, size_t{4100}, size_t{4096 + 8},
                       (size_t{64} << 10) + 16, size_t{1} << 20}) {
    const PeerStoreArgs a = Args(PeerStoreMethod::kTmaBulk, chunk);
    EXPECT_THAT(
        ValidatePeerStoreArgs(a),
        StatusIs(StatusCode::kInvalidArgument, HasSubstr("chunk_bytes " + std::to_string(chunk) +
                                                         " is not a multiple of 16 in 16..65536")))
        << chunk;
    EXPECT_THAT(LaunchPeerStore(a), StatusIs(StatusCode::kInvalidArgument)) << chunk;
  }
}

TEST(PeerStoreTest, RejectsBadArgumentsForEveryMethod) {
  for (PeerStoreMethod m : {PeerStoreMethod::kSmStores, PeerStoreMethod::kTmaBulk}) {
    PeerStoreArgs a = Args(m, 4096);
    a.num_dst = 0;
    EXPECT_THAT(LaunchPeerStore(a), StatusIs(StatusCode::kInvalidArgument, HasSubstr("num_dst")));
    a = Args(m, 4096);
    a.num_dst = kPeerStoreMaxDsts + 1;
    EXPECT_THAT(LaunchPeerStore(a), StatusIs(StatusCode::kInvalidArgument, HasSubstr("num_dst")));
    a = Args(m, 4096);
    a.bytes_per_dst = 40;
    EXPECT_THAT(LaunchPeerStore(a),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("bytes_per_dst 40")));
    a = Args(m, 4096);
    a.bytes_per_dst = 0;
    EXPECT_THAT(LaunchPeerStore(a), StatusIs(StatusCode::kInvalidArgument));
    a = Args(m, 4096);
    a.blocks = 1;
    EXPECT_THAT(LaunchPeerStore(a),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("cannot cover 2 destinations")));
    a = Args(m, 4096);
    a.dst[1] = destinations[1] + 8;
    EXPECT_THAT(LaunchPeerStore(a),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("destination 1")));
    a = Args(m, 4096);
    a.dst[0] = nullptr;
    EXPECT_THAT(LaunchPeerStore(a),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("destination 0")));
  }
  PeerStoreArgs a = Args(static_cast<PeerStoreMethod>(2), 4096);
  EXPECT_THAT(LaunchPeerStore(a), StatusIs(StatusCode::kInvalidArgument, HasSubstr("method 2")));
}

// Where the platform has no bulk copies, a valid TMA request is refused
// before launch, saying so; on NVIDIA the same request passes the checks.
TEST(PeerStoreTest, TmaIsRefusedWhereThePlatformLacksIt) {
  const PeerStoreArgs a = Args(PeerStoreMethod::kTmaBulk, 16 << 10);
  if (TmaBuilt()) {
    EXPECT_OK(ValidatePeerStoreArgs(a));
  } else {
    EXPECT_THAT(LaunchPeerStore(a), StatusIs(StatusCode::kUnsupported, HasSubstr("kTmaBulk")));
  }
}

TEST(PeerStoreTest, PatternIsTheIndexPlusTheWord) {
  EXPECT_EQ(PeerStorePatternWord(0, 0), 0u);
  EXPECT_EQ(PeerStorePatternWord(5, 3), 8u);
  EXPECT_EQ(PeerStorePatternWord((size_t{1} << 32) + 2, 1), 3u);  // index mod 2^32
  EXPECT_EQ(PeerStorePatternWord(0xFFFFFFFFu, 1), 0u);            // words wrap too
}

}  // namespace
}  // namespace qr::kernels
