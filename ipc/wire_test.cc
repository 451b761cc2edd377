#include "ipc/wire.h"

#include <cstring>
#include <random>

#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/names.h"
#include "tests/util/status_matchers.h"

namespace qr::ipc {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

JoinRequest GoodJoin() {
  JoinRequest j;
  j.group = "tp0";
  j.rank = 3;
  j.world_size = 4;
  j.device_id = "0000:1b:00.0";
  j.buffer_bytes = 1 << 20;
  j.timeout_ms = 5000;
  return j;
}

JoinRequest SharedJoin() {
  JoinRequest j = GoodJoin();
  j.allow_shared_device = true;
  return j;
}

std::vector<Message> AllMessages() {
  return {GoodJoin(),
          SharedJoin(),
          PublishedNotice{},
          LeaveRequest{},
          AbortRequest{"bounded wait ran out"},
          StatusRequest{},
          JoinOk{"/quickreduce-0-tp0-3", 3, 2, 42},
          ReadyNotice{9},
          GroupFailedNotice{"rank 1 died"},
          LeaveOk{},
          StatusReply{"{\"a\":1}", false},
          StatusReply{std::string(kMaxStatusPieceBytes, 'j'), true},
          ErrorReply{static_cast<uint32_t>(StatusCode::kTimeout), "ranks [1] missing"}};
}

Message RoundTrip(const Message& m) {
  auto frame = EncodeFrame(m);
  QR_CHECK(frame.ok()) << frame.status();
  size_t consumed = 0;
  auto decoded = TryDecodeFrame(frame->data(), frame->size(), &consumed);
  QR_CHECK(decoded.ok()) << decoded.status();
  QR_CHECK(decoded->has_value());
  QR_CHECK(consumed == frame->size());
  return **decoded;
}

TEST(WireTest, EveryMessageRoundTrips) {
  for (const Message& m : AllMessages()) {
    EXPECT_EQ(RoundTrip(m), m) << MessageTypeName(static_cast<uint16_t>(TypeOf(m)));
  }
}

TEST(WireTest, PartialFramesAskForMore) {
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(GoodJoin()));
  for (size_t n = 0; n < frame.size(); ++n) {
    size_t consumed = 7;
    ASSERT_OK_AND_ASSIGN(auto m, TryDecodeFrame(frame.data(), n, &consumed));
    EXPECT_FALSE(m.has_value()) << n;
    EXPECT_EQ(consumed, 0u);
  }
}

TEST(WireTest, TwoFramesBackToBackDecodeOneAtATime) {
  ASSERT_OK_AND_ASSIGN(auto a, EncodeFrame(LeaveRequest{}));
  ASSERT_OK_AND_ASSIGN(auto b, EncodeFrame(StatusRequest{}));
  a.insert(a.end(), b.begin(), b.end());
  size_t consumed = 0;
  ASSERT_OK_AND_ASSIGN(auto m, TryDecodeFrame(a.data(), a.size(), &consumed));
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(std::holds_alternative<LeaveRequest>(*m));
  EXPECT_EQ(consumed, kFrameHeaderBytes);
}

TEST(WireTest, RefusesBadMagicAtOnce) {
  const uint8_t junk[] = {'G', 'E', 'T', ' '};
  size_t consumed = 0;
  EXPECT_THAT(TryDecodeFrame(junk, sizeof(junk), &consumed),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("magic")));
}

TEST(WireTest, RefusesOtherProtocolVersions) {
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(LeaveRequest{}));
  frame[4] = 1;  // the version before JOIN carried allow_shared_device
  size_t consumed = 0;
  EXPECT_THAT(TryDecodeFrame(frame.data(), frame.size(), &consumed),
              StatusIs(StatusCode::kUnsupported, HasSubstr("protocol version 1")));
  frame[4] = 3;
  EXPECT_THAT(TryDecodeFrame(frame.data(), frame.size(), &consumed),
              StatusIs(StatusCode::kUnsupported, HasSubstr("protocol version 3")));
}

// The flag is the JOIN payload's last byte: only 0 and 1 are meaningful, and
// a version-1 JOIN (without it) is short by that byte.
TEST(WireTest, JoinSharedDeviceFlagIsZeroOrOne) {
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(SharedJoin()));
  ASSERT_EQ(frame.back(), 1);
  const uint16_t type = static_cast<uint16_t>(MessageType::kJoin);
  const uint8_t* payload = frame.data() + kFrameHeaderBytes;
  const size_t size = frame.size() - kFrameHeaderBytes;
  ASSERT_OK_AND_ASSIGN(Message m, DecodePayload(type, payload, size));
  EXPECT_TRUE(std::get<JoinRequest>(m).allow_shared_device);
  frame.back() = 2;
  EXPECT_THAT(DecodePayload(type, payload, size),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("allow_shared_device")));
  EXPECT_THAT(DecodePayload(type, payload, size - 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("truncated")));
}

TEST(WireTest, RefusesFramesOver64KiB) {
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(LeaveRequest{}));
  uint32_t big = kMaxFrameBytes;  // header + this > 64 KiB
  std::memcpy(frame.data() + 8, &big, 4);
  size_t consumed = 0;
  EXPECT_THAT(TryDecodeFrame(frame.data(), frame.size(), &consumed),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("64 KiB")));
  EXPECT_THAT(EncodeFrame(StatusReply{std::string(kMaxFrameBytes, 'x')}),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(WireTest, RefusesUnknownTypesAndTrailingBytes) {
  EXPECT_THAT(DecodePayload(999, nullptr, 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown message type")));
  const uint8_t extra[] = {1};
  EXPECT_THAT(DecodePayload(static_cast<uint16_t>(MessageType::kLeave), extra, 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trailing")));
}

TEST(WireTest, JoinFieldsAreBounded) {
  auto bad = [](auto mutate) {
    JoinRequest j = GoodJoin();
    mutate(j);
    return EncodeFrame(j).status();
  };
  EXPECT_THAT(bad([](JoinRequest& j) { j.group = "no/slash"; }),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](JoinRequest& j) { j.group = std::string(64, 'g'); }),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](JoinRequest& j) { j.rank = 4; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside [0, 4)")));
  EXPECT_THAT(bad([](JoinRequest& j) { j.world_size = 3; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("2, 4 or 8")));
  EXPECT_THAT(bad([](JoinRequest& j) { j.timeout_ms = 0; }),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad([](JoinRequest& j) { j.device_id = ""; }),
              StatusIs(StatusCode::kInvalidArgument));

  // The decoder applies the same bounds to bytes a hostile peer wrote.
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(GoodJoin()));
  // Payload: u16 len + "tp0" + u32 rank ... ; set rank (offset 12+2+3) to 9.
  uint32_t rank = 9;
  std::memcpy(frame.data() + kFrameHeaderBytes + 5, &rank, 4);
  size_t consumed = 0;
  EXPECT_THAT(TryDecodeFrame(frame.data(), frame.size(), &consumed),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("rank 9")));
}

TEST(WireTest, TruncatedPayloadIsAnError) {
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(GoodJoin()));
  const uint8_t* payload = frame.data() + kFrameHeaderBytes;
  size_t n = frame.size() - kFrameHeaderBytes;
  for (size_t cut = 0; cut < n; ++cut) {
    EXPECT_FALSE(DecodePayload(static_cast<uint16_t>(MessageType::kJoin), payload, cut).ok());
  }
}

TEST(WireTest, ErrorRepliesCarryRealCodes) {
  EXPECT_THAT(EncodeFrame(ErrorReply{0, "ok is not an error"}),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(EncodeFrame(ErrorReply{99, "x"}), StatusIs(StatusCode::kInvalidArgument));
}

TEST(WireTest, ErrorReplyCarriesAStatusBothWays) {
  ErrorReply e = ErrorReplyFor(TimeoutError(std::string(2000, 'x')));
  EXPECT_EQ(e.code, static_cast<uint32_t>(StatusCode::kTimeout));
  EXPECT_EQ(e.message.size(), kMaxMessageBytes);
  ASSERT_OK(EncodeFrame(e).status());
  EXPECT_THAT(StatusOf(e), StatusIs(StatusCode::kTimeout));
  EXPECT_THAT(StatusOf(ErrorReply{99, "from a newer peer"}), StatusIs(StatusCode::kInternal));
}

TEST(WireTest, ErrorReplyForEchoedTextAlwaysEncodes) {
  // What the peer sent comes back in the message: a NUL, bytes that are not
  // UTF-8, and a cut through a character at the length limit.
  ErrorReply nul = ErrorReplyFor(InvalidArgumentError(std::string("group 'a\0b'", 11)));
  EXPECT_EQ(nul.message, "group 'a\\x00b'");
  ASSERT_OK(EncodeFrame(nul).status());
  ErrorReply bad = ErrorReplyFor(InvalidArgumentError("name \xff\xfe"));
  EXPECT_EQ(bad.message, "name \\xff\\xfe");
  std::string euros;
  for (int i = 0; i < 400; ++i) euros += "\xE2\x82\xAC";
  ErrorReply cut = ErrorReplyFor(InvalidArgumentError("x" + euros));
  EXPECT_EQ(cut.message.size(), 1 + 341 * 3u);  // whole characters only
  ASSERT_OK(EncodeFrame(cut).status());
}

TEST(WireTest, JoinOkCarriesTheLongestSegmentNames) {
  // The longest uid, group name and generation: 63-byte names at any
  // generation must reach the client.
  JoinOk ok{SegmentName(4294967294u, std::string(63, 'g'), ~uint64_t{0}, ~uint64_t{0}),
            ~uint64_t{0}, 7, 1};
  ASSERT_OK_AND_ASSIGN(auto frame, EncodeFrame(ok));
  size_t consumed = 0;
  ASSERT_OK_AND_ASSIGN(auto back, TryDecodeFrame(frame.data(), frame.size(), &consumed));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(std::get<JoinOk>(*back), ok);
  ok.segment_name = "/" + std::string(kMaxShmNameBytes, 'x');
  EXPECT_THAT(EncodeFrame(ok), StatusIs(StatusCode::kInvalidArgument));
}

TEST(WireTest, RequestLimitRefusesABigFrameByItsHeader) {
  std::vector<uint8_t> header(kFrameHeaderBytes);
  uint16_t version = kProtocolVersion, type = static_cast<uint16_t>(MessageType::kAbort);
  uint32_t payload = 600;  // only the header has arrived
  std::memcpy(header.data(), &kWireMagic, 4);
  std::memcpy(header.data() + 4, &version, 2);
  std::memcpy(header.data() + 6, &type, 2);
  std::memcpy(header.data() + 8, &payload, 4);
  size_t consumed = 0;
  EXPECT_THAT(TryDecodeFrame(header.data(), header.size(), &consumed, kMaxRequestFrameBytes),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("512-byte request limit")));
  // Without the request limit it waits for the rest.
  ASSERT_OK_AND_ASSIGN(auto more, TryDecodeFrame(header.data(), header.size(), &consumed));
  EXPECT_FALSE(more.has_value());
  // Every request a client can send fits the limit.
  JoinRequest j = GoodJoin();
  j.group = std::string(kMaxNameBytes, 'g');
  j.device_id = std::string(kMaxDeviceIdBytes, 'd');
  ASSERT_OK_AND_ASSIGN(auto join, EncodeFrame(j));
  EXPECT_LE(join.size(), kMaxRequestFrameBytes);
  ASSERT_OK_AND_ASSIGN(auto abort, EncodeFrame(AbortRequest{std::string(kMaxReasonBytes, 'r')}));
  EXPECT_LE(abort.size(), kMaxRequestFrameBytes);
}

TEST(WireTest, RandomBytesNeverCrashTheDecoder) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> buf(rng() % 80);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    if (buf.size() >= 4 && (i % 2) == 0) std::memcpy(buf.data(), &kWireMagic, 4);
    if (buf.size() >= 6 && (i % 4) == 0) buf[4] = 1, buf[5] = 0;
    size_t consumed = 0;
    auto r = TryDecodeFrame(buf.data(), buf.size(), &consumed);
    if (r.ok() && r->has_value()) {
      EXPECT_LE(consumed, buf.size());
    }
  }
}

}  // namespace
}  // namespace qr::ipc
