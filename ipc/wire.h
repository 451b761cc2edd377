// The broker wire protocol: framed, versioned, bounded messages on the broker's
// Unix stream socket.
//
// Frame (little-endian):
//   u32 magic 'QRWP' | u16 protocol version | u16 message type | u32 payload bytes | payload
// A frame is at most kMaxFrameBytes (64 KiB) including the 12-byte header.
// Payload fields are fixed-width integers and strings (u16 length + bytes;
// u32 length for the status JSON); every message type has an exact field list
// and a decoded message must consume its payload exactly. Names are
// [A-Za-z0-9._-]{1,63}, ranks in [0, world_size), world sizes 2/4/8.
//
// Conversation: a client sends JOIN and gets JOIN_OK or ERROR; later
// PUBLISHED, then READY (or ERROR / GROUP_FAILED) arrives; LEAVE gets
// LEAVE_OK. ABORT marks the group FAILED. STATUS (qrctl) gets STATUS_REPLY.
// An unknown or malformed frame gets ERROR and the broker closes that
// connection only.
//
// All functions are pure and thread-safe.
#ifndef QR_IPC_WIRE_H_
#define QR_IPC_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace qr::ipc {

inline constexpr uint32_t kWireMagic = 0x50575251;  // "QRWP" little-endian
// 2: JOIN carries allow_shared_device.
inline constexpr uint16_t kProtocolVersion = 2;
inline constexpr size_t kFrameHeaderBytes = 12;
inline constexpr size_t kMaxFrameBytes = 64 * 1024;
inline constexpr size_t kMaxReasonBytes = 255;
inline constexpr size_t kMaxMessageBytes = 1024;
// The largest frame a client sends (JOIN, ABORT, ...: 269 bytes at most); the
// broker refuses a larger one as soon as its header arrives, so a peer cannot
// make it buffer 64 KiB per connection.
inline constexpr size_t kMaxRequestFrameBytes = 512;
// The largest status piece one STATUS_REPLY frame carries.
inline constexpr size_t kMaxStatusPieceBytes = kMaxFrameBytes - kFrameHeaderBytes - 5;

enum class MessageType : uint16_t {
  kJoin = 1,
  kPublished = 2,
  kLeave = 3,
  kAbort = 4,
  kStatus = 5,
  kJoinOk = 64,
  kReady = 65,
  kGroupFailed = 66,
  kLeaveOk = 67,
  kStatusReply = 68,
  kError = 69,
};

struct JoinRequest {
  std::string group;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  std::string device_id;
  uint64_t buffer_bytes = 0;
  uint32_t timeout_ms = 0;  // 0 < timeout_ms <= 24 h
  // This rank agrees to share its GPU with other ranks of the group (a u8,
  // 0 or 1; QR_ALLOW_SHARED_DEVICE). The broker admits two ranks on one
  // device only when every member of the group sent 1.
  bool allow_shared_device = false;
  bool operator==(const JoinRequest& o) const {
    return group == o.group && rank == o.rank && world_size == o.world_size &&
           device_id == o.device_id && buffer_bytes == o.buffer_bytes &&
           timeout_ms == o.timeout_ms && allow_shared_device == o.allow_shared_device;
  }
};
struct PublishedNotice {
  bool operator==(const PublishedNotice&) const { return true; }
};
struct LeaveRequest {
  bool operator==(const LeaveRequest&) const { return true; }
};
struct AbortRequest {
  std::string reason;  // <= kMaxReasonBytes
  bool operator==(const AbortRequest& o) const { return reason == o.reason; }
};
struct StatusRequest {
  bool operator==(const StatusRequest&) const { return true; }
};
struct JoinOk {
  std::string segment_name;  // "/quickreduce-<uid>-<group>-<generation>"
  uint64_t generation = 0;
  uint32_t rank = 0;
  int32_t broker_pid = 0;
  bool operator==(const JoinOk& o) const {
    return segment_name == o.segment_name && generation == o.generation && rank == o.rank &&
           broker_pid == o.broker_pid;
  }
};
struct ReadyNotice {
  uint64_t generation = 0;
  bool operator==(const ReadyNotice& o) const { return generation == o.generation; }
};
struct GroupFailedNotice {
  std::string reason;
  bool operator==(const GroupFailedNotice& o) const { return reason == o.reason; }
};
struct LeaveOk {
  bool operator==(const LeaveOk&) const { return true; }
};
// The status document may exceed one frame: it arrives as consecutive
// STATUS_REPLY frames whose pieces concatenate; `more` is false on the last.
struct StatusReply {
  std::string json;  // a piece of the document qrctl prints; see docs/qrctl.md
  bool more = false;
  bool operator==(const StatusReply& o) const { return json == o.json && more == o.more; }
};
struct ErrorReply {
  uint32_t code = 0;    // a StatusCode value, never kOk
  std::string message;  // <= kMaxMessageBytes
  bool operator==(const ErrorReply& o) const { return code == o.code && message == o.message; }
};

// An error reply carrying `status` (not OK); the message is cut to
// kMaxMessageBytes.
ErrorReply ErrorReplyFor(const Status& status);
// The Status an error reply carries (kInternal for a code this side does not
// know).
Status StatusOf(const ErrorReply& e);

using Message =
    std::variant<JoinRequest, PublishedNotice, LeaveRequest, AbortRequest, StatusRequest, JoinOk,
                 ReadyNotice, GroupFailedNotice, LeaveOk, StatusReply, ErrorReply>;

MessageType TypeOf(const Message& m);
const char* MessageTypeName(uint16_t type);  // "JOIN", ..., or "UNKNOWN"

// Encodes one frame. kInvalidArgument if a field is out of bounds (the same
// bounds the decoder enforces), so a well-behaved peer never sends a frame
// the other side rejects.
[[nodiscard]] StatusOr<std::vector<uint8_t>> EncodeFrame(const Message& m);

// Looks for one complete frame at the start of data[0, size). Returns nullopt
// when more bytes are needed; the message and sets *consumed when a frame is
// complete; kInvalidArgument for a bad magic or a frame over max_frame_bytes
// (checked once the header is there), kUnsupported for another protocol
// version, and the decoder's error for a malformed payload (the connection
// should then be closed).
[[nodiscard]] StatusOr<std::optional<Message>> TryDecodeFrame(
    const uint8_t* data, size_t size, size_t* consumed, size_t max_frame_bytes = kMaxFrameBytes);

// Decodes one payload of a known type (used by TryDecodeFrame and the fuzzer).
[[nodiscard]] StatusOr<Message> DecodePayload(uint16_t type, const uint8_t* data, size_t size);

}  // namespace qr::ipc

#endif  // QR_IPC_WIRE_H_
