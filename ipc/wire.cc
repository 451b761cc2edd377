#include "ipc/wire.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/limits.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "ipc/names.h"

namespace qr::ipc {
namespace {

constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 40;

class Writer {
 public:
  void U8(uint8_t v) { Put(&v, 1); }
  void U16(uint16_t v) { Put(&v, 2); }
  void U32(uint32_t v) { Put(&v, 4); }
  void U64(uint64_t v) { Put(&v, 8); }
  void I32(int32_t v) { Put(&v, 4); }
  void Str16(const std::string& s) {
    U16(static_cast<uint16_t>(s.size()));
    Put(s.data(), s.size());
  }
  void Str32(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    Put(s.data(), s.size());
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  // The wire is little-endian, as is every host this project supports.
  void Put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  Status U8(uint8_t* v) { return Get(v, 1); }
  Status U16(uint16_t* v) { return Get(v, 2); }
  Status U32(uint32_t* v) { return Get(v, 4); }
  Status U64(uint64_t* v) { return Get(v, 8); }
  Status I32(int32_t* v) { return Get(v, 4); }
  Status Str16(std::string* s, size_t max) {
    uint16_t n = 0;
    QR_RETURN_IF_ERROR(U16(&n));
    return Bytes(s, n, max);
  }
  Status Str32(std::string* s, size_t max) {
    uint32_t n = 0;
    QR_RETURN_IF_ERROR(U32(&n));
    return Bytes(s, n, max);
  }
  Status End() const {
    if (pos_ != size_) {
      return InvalidArgumentError(std::to_string(size_ - pos_) + " trailing payload bytes");
    }
    return OkStatus();
  }

 private:
  Status Get(void* v, size_t n) {
    if (size_ - pos_ < n) return InvalidArgumentError("payload truncated");
    std::memcpy(v, data_ + pos_, n);
    pos_ += n;
    return OkStatus();
  }
  Status Bytes(std::string* s, size_t n, size_t max) {
    if (n > max) {
      return InvalidArgumentError("string of " + std::to_string(n) + " bytes, limit " +
                                  std::to_string(max));
    }
    if (size_ - pos_ < n) return InvalidArgumentError("payload truncated");
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return OkStatus();
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Status ValidateJoin(const JoinRequest& m) {
  QR_RETURN_IF_ERROR(ValidateName("group name", m.group));
  QR_RETURN_IF_ERROR(ValidateWorldSize(static_cast<int>(m.world_size)));
  QR_RETURN_IF_ERROR(ValidateRank(m.rank, static_cast<int>(m.world_size)));
  QR_RETURN_IF_ERROR(ValidateDeviceId(m.device_id));
  if (m.buffer_bytes > kMaxBufferBytes) {
    return InvalidArgumentError("buffer bytes " + std::to_string(m.buffer_bytes) +
                                " over the 1 TiB limit");
  }
  if (m.timeout_ms == 0 || m.timeout_ms > kMaxTimeoutMs) {
    return InvalidArgumentError("join timeout must be 1 ms to 24 h, got " +
                                std::to_string(m.timeout_ms) + " ms");
  }
  return OkStatus();
}

Status ValidateText(std::string_view what, const std::string& s) {
  for (char c : s) {
    if (c == '\0') return InvalidArgumentError(std::string(what) + " contains NUL");
  }
  return OkStatus();
}

Status ValidateJoinOk(const JoinOk& m) {
  // Any name shm_open takes: segment names grew a nonce and exceed 63 bytes.
  QR_RETURN_IF_ERROR(ValidateShmName(m.segment_name));
  if (m.rank >= kMaxWorldSize) return InvalidArgumentError("rank out of range");
  if (m.broker_pid <= 0) return InvalidArgumentError("bad broker pid");
  return OkStatus();
}

Status ValidateError(const ErrorReply& m) {
  if (m.code == 0 || !StatusCodeFromInt(m.code).has_value()) {
    return InvalidArgumentError("bad status code " + std::to_string(m.code));
  }
  return ValidateText("error message", m.message);
}

Status Validate(const Message& msg) {
  if (auto* m = std::get_if<JoinRequest>(&msg)) return ValidateJoin(*m);
  if (auto* m = std::get_if<JoinOk>(&msg)) return ValidateJoinOk(*m);
  if (auto* m = std::get_if<ErrorReply>(&msg)) return ValidateError(*m);
  if (auto* m = std::get_if<AbortRequest>(&msg)) return ValidateText("reason", m->reason);
  if (auto* m = std::get_if<GroupFailedNotice>(&msg)) return ValidateText("reason", m->reason);
  return OkStatus();
}

}  // namespace

ErrorReply ErrorReplyFor(const Status& status) {
  // Messages echo what the peer sent (names, reasons): a NUL there would make
  // the reply unencodable, and the peer would see a bare EOF instead.
  std::string text = SanitizeUtf8(status.message());
  StatusCode code = status.ok() ? StatusCode::kInternal : status.code();
  return ErrorReply{static_cast<uint32_t>(code), std::string(Utf8Prefix(text, kMaxMessageBytes))};
}

Status StatusOf(const ErrorReply& e) {
  return Status(StatusCodeFromInt(e.code).value_or(StatusCode::kInternal), e.message);
}

MessageType TypeOf(const Message& m) {
  static constexpr MessageType kTypes[] = {
      MessageType::kJoin,        MessageType::kPublished,   MessageType::kLeave,
      MessageType::kAbort,       MessageType::kStatus,      MessageType::kJoinOk,
      MessageType::kReady,       MessageType::kGroupFailed, MessageType::kLeaveOk,
      MessageType::kStatusReply, MessageType::kError};
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[m.index()];
}

const char* MessageTypeName(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kJoin:
      return "JOIN";
    case MessageType::kPublished:
      return "PUBLISHED";
    case MessageType::kLeave:
      return "LEAVE";
    case MessageType::kAbort:
      return "ABORT";
    case MessageType::kStatus:
      return "STATUS";
    case MessageType::kJoinOk:
      return "JOIN_OK";
    case MessageType::kReady:
      return "READY";
    case MessageType::kGroupFailed:
      return "GROUP_FAILED";
    case MessageType::kLeaveOk:
      return "LEAVE_OK";
    case MessageType::kStatusReply:
      return "STATUS_REPLY";
    case MessageType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

StatusOr<std::vector<uint8_t>> EncodeFrame(const Message& msg) {
  QR_RETURN_IF_ERROR(Validate(msg));
  Writer w;
  w.U32(kWireMagic);
  w.U16(kProtocolVersion);
  w.U16(static_cast<uint16_t>(TypeOf(msg)));
  w.U32(0);  // payload size, patched below
  if (auto* m = std::get_if<JoinRequest>(&msg)) {
    w.Str16(m->group);
    w.U32(m->rank);
    w.U32(m->world_size);
    w.Str16(m->device_id);
    w.U64(m->buffer_bytes);
    w.U32(m->timeout_ms);
    w.U8(m->allow_shared_device ? 1 : 0);
  } else if (auto* m = std::get_if<AbortRequest>(&msg)) {
    if (m->reason.size() > kMaxReasonBytes) return InvalidArgumentError("abort reason too long");
    w.Str16(m->reason);
  } else if (auto* m = std::get_if<JoinOk>(&msg)) {
    w.Str16(m->segment_name);
    w.U64(m->generation);
    w.U32(m->rank);
    w.I32(m->broker_pid);
  } else if (auto* m = std::get_if<ReadyNotice>(&msg)) {
    w.U64(m->generation);
  } else if (auto* m = std::get_if<GroupFailedNotice>(&msg)) {
    if (m->reason.size() > kMaxReasonBytes) return InvalidArgumentError("failure reason too long");
    w.Str16(m->reason);
  } else if (auto* m = std::get_if<StatusReply>(&msg)) {
    if (m->json.size() > kMaxStatusPieceBytes) {
      return InvalidArgumentError("status reply of " + std::to_string(m->json.size()) +
                                  " bytes does not fit a frame");
    }
    w.U8(m->more ? 1 : 0);
    w.Str32(m->json);
  } else if (auto* m = std::get_if<ErrorReply>(&msg)) {
    if (m->message.size() > kMaxMessageBytes) return InvalidArgumentError("error text too long");
    w.U32(m->code);
    w.Str16(m->message);
  }
  std::vector<uint8_t>& out = w.bytes();
  uint32_t payload = static_cast<uint32_t>(out.size() - kFrameHeaderBytes);
  std::memcpy(out.data() + 8, &payload, 4);
  return std::move(out);
}

StatusOr<Message> DecodePayload(uint16_t type, const uint8_t* data, size_t size) {
  Reader r(data, size);
  Message msg;
  switch (static_cast<MessageType>(type)) {
    case MessageType::kJoin: {
      JoinRequest m;
      QR_RETURN_IF_ERROR(r.Str16(&m.group, kMaxNameBytes));
      QR_RETURN_IF_ERROR(r.U32(&m.rank));
      QR_RETURN_IF_ERROR(r.U32(&m.world_size));
      QR_RETURN_IF_ERROR(r.Str16(&m.device_id, kMaxDeviceIdBytes));
      QR_RETURN_IF_ERROR(r.U64(&m.buffer_bytes));
      QR_RETURN_IF_ERROR(r.U32(&m.timeout_ms));
      uint8_t shared = 0;
      QR_RETURN_IF_ERROR(r.U8(&shared));
      if (shared > 1) return InvalidArgumentError("allow_shared_device must be 0 or 1");
      m.allow_shared_device = shared != 0;
      msg = std::move(m);
      break;
    }
    case MessageType::kPublished:
      msg = PublishedNotice{};
      break;
    case MessageType::kLeave:
      msg = LeaveRequest{};
      break;
    case MessageType::kAbort: {
      AbortRequest m;
      QR_RETURN_IF_ERROR(r.Str16(&m.reason, kMaxReasonBytes));
      msg = std::move(m);
      break;
    }
    case MessageType::kStatus:
      msg = StatusRequest{};
      break;
    case MessageType::kJoinOk: {
      JoinOk m;
      QR_RETURN_IF_ERROR(r.Str16(&m.segment_name, kMaxShmNameBytes));
      QR_RETURN_IF_ERROR(r.U64(&m.generation));
      QR_RETURN_IF_ERROR(r.U32(&m.rank));
      QR_RETURN_IF_ERROR(r.I32(&m.broker_pid));
      msg = std::move(m);
      break;
    }
    case MessageType::kReady: {
      ReadyNotice m;
      QR_RETURN_IF_ERROR(r.U64(&m.generation));
      msg = m;
      break;
    }
    case MessageType::kGroupFailed: {
      GroupFailedNotice m;
      QR_RETURN_IF_ERROR(r.Str16(&m.reason, kMaxReasonBytes));
      msg = std::move(m);
      break;
    }
    case MessageType::kLeaveOk:
      msg = LeaveOk{};
      break;
    case MessageType::kStatusReply: {
      StatusReply m;
      uint8_t more = 0;
      QR_RETURN_IF_ERROR(r.U8(&more));
      if (more > 1) return InvalidArgumentError("bad 'more' flag");
      m.more = more != 0;
      QR_RETURN_IF_ERROR(r.Str32(&m.json, kMaxStatusPieceBytes));
      msg = std::move(m);
      break;
    }
    case MessageType::kError: {
      ErrorReply m;
      QR_RETURN_IF_ERROR(r.U32(&m.code));
      QR_RETURN_IF_ERROR(r.Str16(&m.message, kMaxMessageBytes));
      msg = std::move(m);
      break;
    }
    default:
      return InvalidArgumentError("unknown message type " + std::to_string(type));
  }
  QR_RETURN_IF_ERROR(r.End());
  QR_RETURN_IF_ERROR(Validate(msg));
  return msg;
}

StatusOr<std::optional<Message>> TryDecodeFrame(const uint8_t* data, size_t size, size_t* consumed,
                                                size_t max_frame_bytes) {
  *consumed = 0;
  // Check the magic as soon as it is there so garbage is refused before the
  // peer has sent a whole header.
  if (size >= 4) {
    uint32_t magic = 0;
    std::memcpy(&magic, data, 4);
    if (magic != kWireMagic) return InvalidArgumentError("bad frame magic");
  }
  if (size < kFrameHeaderBytes) return std::optional<Message>();
  uint16_t version = 0, type = 0;
  uint32_t payload = 0;
  std::memcpy(&version, data + 4, 2);
  std::memcpy(&type, data + 6, 2);
  std::memcpy(&payload, data + 8, 4);
  if (version != kProtocolVersion) {
    return UnsupportedError("protocol version " + std::to_string(version) + ", this side speaks " +
                            std::to_string(kProtocolVersion));
  }
  const size_t limit = std::min(max_frame_bytes, kMaxFrameBytes);
  if (payload > limit - kFrameHeaderBytes) {
    return InvalidArgumentError(
        "frame of " + std::to_string(payload + size_t{kFrameHeaderBytes}) + " bytes over the " +
        (limit == kMaxFrameBytes ? std::string("64 KiB")
                                 : std::to_string(limit) + "-byte request") +
        " limit");
  }
  if (size - kFrameHeaderBytes < payload) return std::optional<Message>();
  QR_ASSIGN_OR_RETURN(Message m, DecodePayload(type, data + kFrameHeaderBytes, payload));
  *consumed = kFrameHeaderBytes + payload;
  return std::optional<Message>(std::move(m));
}

}  // namespace qr::ipc
