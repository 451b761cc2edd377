#include "ipc/names.h"

#include <stdlib.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace qr::ipc {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

TEST(NamesTest, AcceptsTheAllowedAlphabet) {
  EXPECT_OK(ValidateName("group", "tp-0.a_B9"));
  EXPECT_OK(ValidateName("group", std::string(63, 'x')));
}

TEST(NamesTest, RefusesEmptyLongAndOddNames) {
  EXPECT_THAT(ValidateName("group", ""), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateName("group", std::string(64, 'x')),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1 to 63")));
  EXPECT_THAT(ValidateName("group", "a/b"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateName("group", "a b"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateName("group", std::string("a\0b", 3)),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(NamesTest, RanksLieInsideTheWorld) {
  EXPECT_OK(ValidateRank(0, 2));
  EXPECT_OK(ValidateRank(7, 8));
  EXPECT_THAT(ValidateRank(-1, 2), StatusIs(StatusCode::kInvalidArgument, HasSubstr("[0, 2)")));
  EXPECT_THAT(ValidateRank(4, 4), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateRank(int64_t{1} << 32, 8), StatusIs(StatusCode::kInvalidArgument));
}

TEST(NamesTest, DeviceIdsArePrintable) {
  EXPECT_OK(ValidateDeviceId("0000:1b:00.0"));
  EXPECT_OK(ValidateDeviceId("GPU-8f2a"));
  EXPECT_THAT(ValidateDeviceId(""), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateDeviceId("a b"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateDeviceId(std::string(64, 'd')), StatusIs(StatusCode::kInvalidArgument));
}

TEST(NamesTest, SegmentNamesFollowTheScheme) {
  EXPECT_EQ(SegmentName(1000, "tp0", 7, 0xabcdef12345ull),
            "/quickreduce-1000-tp0-7-00000abcdef12345");
  EXPECT_EQ(UserPrefix(0), "/quickreduce-0-");
}

TEST(NamesTest, SegmentNamesParseBack) {
  auto parts = ParseSegmentName(SegmentName(7, "a-1-b-2", 10, ~0ull));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->uid, 7u);
  EXPECT_EQ(parts->group, "a-1-b-2");
  EXPECT_EQ(parts->generation, 10u);
  EXPECT_EQ(parts->nonce, ~0ull);
  for (const char* bad :
       {"/quickreduce-7-a-1", "/quickreduce-7-a-1-00000000000000zz",
        "/quickreduce-x-a-1-0000000000000000", "/quickreduce-7--1-0000000000000000",
        "/quickreduce-7-a-01-0000000000000000", "/quickreduce-7-a-1-0000000000000000-host0",
        "quickreduce-7-a-1-0000000000000000"}) {
    EXPECT_FALSE(ParseSegmentName(bad).has_value()) << bad;
  }
}

// The name limits that used to bite (63 bytes after the slash in JOIN_OK)
// are gone: the longest group at the largest uid and generation, with the
// longest data suffix, is still a valid shm name.
TEST(NamesTest, EveryValidGroupFitsAtEveryGeneration) {
  const std::string group(kMaxNameBytes, 'g');
  const std::string seg = SegmentName(UINT32_MAX, group, UINT64_MAX, UINT64_MAX);
  EXPECT_EQ(seg.size(), kMaxSegmentNameBytes);
  EXPECT_OK(ValidateShmName(seg));
  EXPECT_OK(ValidateShmName(seg + "-" + std::string(kMaxNameBytes, 's')));
  EXPECT_THAT(ValidateShmName("/" + std::string(256, 'x')), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateShmName("/a/b"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateShmName("noslash"), StatusIs(StatusCode::kInvalidArgument));
}

TEST(NamesTest, NoncesAreRandom) {
  ASSERT_OK_AND_ASSIGN(uint64_t a, RandomNonce());
  ASSERT_OK_AND_ASSIGN(uint64_t b, RandomNonce());
  EXPECT_NE(a, b);
}

TEST(NamesTest, SocketPathPrecedence) {
  ::setenv("QR_BROKER_SOCKET", "/tmp/x/env.sock", 1);
  ASSERT_OK_AND_ASSIGN(std::string p, ResolveSocketPath("/tmp/explicit.sock"));
  EXPECT_EQ(p, "/tmp/explicit.sock");
  ASSERT_OK_AND_ASSIGN(p, ResolveSocketPath(""));
  EXPECT_EQ(p, "/tmp/x/env.sock");
  ::unsetenv("QR_BROKER_SOCKET");
  ::setenv("XDG_RUNTIME_DIR", "/run/user/5", 1);
  ASSERT_OK_AND_ASSIGN(p, ResolveSocketPath(""));
  EXPECT_EQ(p, "/run/user/5/quickreduce/broker.sock");
  ::unsetenv("XDG_RUNTIME_DIR");
  ASSERT_OK_AND_ASSIGN(p, ResolveSocketPath(""));
  EXPECT_EQ(p, "/tmp/quickreduce-" + std::to_string(::getuid()) + "/broker.sock");
  EXPECT_EQ(LockPathFor("/a/b.sock"), "/a/b.sock.lock");
}

TEST(NamesTest, RefusesSocketPathsThatDoNotFit) {
  EXPECT_THAT(ResolveSocketPath("/" + std::string(200, 's')),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("107")));
}

TEST(NamesTest, ProcessAliveSeesSelfAndNotNonsense) {
  EXPECT_TRUE(ProcessAlive(::getpid()));
  EXPECT_FALSE(ProcessAlive(0));
  EXPECT_FALSE(ProcessAlive(-5));
  EXPECT_FALSE(ProcessAlive(0x3ffffff0));
}

}  // namespace
}  // namespace qr::ipc
