// libFuzzer target for the broker's wire decoder (ipc/wire.h).
//
// Properties checked on every input: decoding never crashes, never reads out
// of bounds (ASan), consumes no more than it was given, and whatever decodes
// re-encodes to a frame that decodes to the same message. Text fields may
// hold any bytes (non-ASCII, invalid UTF-8): what the broker makes of a
// decoded reason or name (sanitised, cut on a character boundary, echoed in
// an error reply or a failure notice) must be valid UTF-8 and encodable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/utf8.h"
#include "ipc/wire.h"

namespace {

// What the broker does with a peer's text: a failure notice carrying it and
// an error reply quoting it.
void CheckBrokerEcho(const std::string& text) {
  std::string reason = qr::SanitizeUtf8("rank 0 (pid 1) aborted: " + text);
  std::string notice(qr::Utf8Prefix(reason, qr::ipc::kMaxReasonBytes));
  if (!qr::IsValidUtf8(notice)) std::abort();
  if (!qr::ipc::EncodeFrame(qr::ipc::GroupFailedNotice{notice}).ok()) std::abort();
  auto reply = qr::ipc::ErrorReplyFor(qr::InvalidArgumentError("group '" + text + "'"));
  if (!qr::IsValidUtf8(reply.message)) std::abort();
  if (!qr::ipc::EncodeFrame(reply).ok()) std::abort();
}

void CheckText(const qr::ipc::Message& m) {
  if (auto* a = std::get_if<qr::ipc::AbortRequest>(&m)) CheckBrokerEcho(a->reason);
  if (auto* j = std::get_if<qr::ipc::JoinRequest>(&m)) CheckBrokerEcho(j->device_id);
  if (auto* f = std::get_if<qr::ipc::GroupFailedNotice>(&m)) CheckBrokerEcho(f->reason);
  if (auto* e = std::get_if<qr::ipc::ErrorReply>(&m)) CheckBrokerEcho(e->message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using qr::ipc::Message;
  // 1. The input as a byte stream of frames, as the broker reads a socket.
  size_t off = 0;
  while (off < size) {
    size_t consumed = 0;
    auto m = qr::ipc::TryDecodeFrame(data + off, size - off, &consumed);
    if (!m.ok() || !m->has_value()) break;
    if (consumed == 0 || consumed > size - off) std::abort();
    off += consumed;
    auto again = qr::ipc::EncodeFrame(**m);
    if (!again.ok()) std::abort();  // a decoded message must be encodable
    size_t consumed2 = 0;
    auto round = qr::ipc::TryDecodeFrame(again->data(), again->size(), &consumed2);
    if (!round.ok() || !round->has_value() || !(**round == **m) || consumed2 != again->size()) {
      std::abort();
    }
    CheckText(**m);
  }
  // 2. The input as a payload of the type its first two bytes name.
  if (size >= 2) {
    uint16_t type = static_cast<uint16_t>(data[0] | (data[1] << 8));
    auto m = qr::ipc::DecodePayload(type, data + 2, size - 2);
    if (m.ok() && !qr::ipc::EncodeFrame(*m).ok()) std::abort();
    if (m.ok()) CheckText(*m);
  }
  // 3. The input as a peer's text (a reason, a name), whatever its bytes.
  CheckBrokerEcho(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
