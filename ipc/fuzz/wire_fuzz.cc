// libFuzzer target for the broker's wire decoder (ipc/wire.h).
//
// Properties checked on every input: decoding never crashes, never reads out
// of bounds (ASan), consumes no more than it was given, and whatever decodes
// re-encodes to a frame that decodes to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "ipc/wire.h"

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
  }
  // 2. The input as a payload of the type its first two bytes name.
  if (size >= 2) {
    uint16_t type = static_cast<uint16_t>(data[0] | (data[1] << 8));
    auto m = qr::ipc::DecodePayload(type, data + 2, size - 2);
    if (m.ok() && !qr::ipc::EncodeFrame(*m).ok()) std::abort();
  }
  return 0;
}
