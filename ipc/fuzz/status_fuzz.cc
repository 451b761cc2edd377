// libFuzzer target for the status path: the text helpers (common/utf8.h)
// that every string passes on its way into the broker's JSON, its error
// replies and qrctl's output, and qrctl's rendering of any document a broker
// (or an impostor) might send.
//
// Properties checked on every input, read as arbitrary bytes: sanitised text
// is valid UTF-8 and dumps as JSON that parses back; cuts never split a
// character; an error reply echoing the input always encodes; terminal text
// has no control characters; and the input parsed as a status document (if
// it is JSON) renders without throwing, as valid UTF-8 whose only control
// character is the newline, ending in exactly one "status:" line.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "ipc/wire.h"
#include "nlohmann/json.hpp"
#include "tools/qrctl_render.h"

namespace {

// Aborts (a finding) naming the property that failed.
#define QR_FUZZ_CHECK(cond)                                                        \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "status fuzz: %s failed (line %d)\n", #cond, __LINE__); \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

bool TerminalSafe(std::string_view s, bool newlines) {
  if (!qr::IsValidUtf8(s)) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && !(newlines && c == '\n')) || c == 0x7F) return false;
    // C1 controls are U+0080..U+009F: C2 80..C2 9F.
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  // 1. The text helpers.
  std::string clean = qr::SanitizeUtf8(text);
  QR_FUZZ_CHECK(qr::IsValidUtf8(clean));
  if (qr::IsValidUtf8(text) && text.find('\0') == text.npos) QR_FUZZ_CHECK(clean == text);
  for (size_t max : {size_t{0}, size_t{1}, size / 2, size_t{127}, size_t{255}}) {
    std::string_view cut = qr::Utf8Prefix(clean, max);
    QR_FUZZ_CHECK(cut.size() <= max && qr::IsValidUtf8(cut));
    QR_FUZZ_CHECK(clean.size() <= max || max - cut.size() < 4);
  }
  QR_FUZZ_CHECK(TerminalSafe(qr::EscapeForTerminal(text), /*newlines=*/false));

  // 2. What the broker does with such text: JSON fields and error replies.
  json doc = {
      {"broker", {{"pid", 1}, {"socket", clean}}},
      {"groups", {{{"name", clean}, {"failure_reason", clean}, {"members", json::array()}}}},
      {"stale_objects", {clean}},
      {"problems", {{{"message", clean}, {"remedy", clean}}}}};
  std::string dumped = qr::tools::DumpStatus(doc, -1);
  json back = json::parse(dumped, nullptr, /*allow_exceptions=*/false);
  QR_FUZZ_CHECK(!back.is_discarded() && back == doc);
  auto frame =
      qr::ipc::EncodeFrame(qr::ipc::ErrorReplyFor(qr::InvalidArgumentError(std::string(text))));
  QR_FUZZ_CHECK(frame.ok());

  // 3. The input as a status document that qrctl renders.
  json any = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!any.is_discarded()) {
    std::string out = qr::tools::RenderStatusText(any);
    QR_FUZZ_CHECK(TerminalSafe(out, /*newlines=*/true));
    size_t status_lines = 0;
    for (size_t pos = 0; (pos = out.find("\nstatus: ", pos)) != std::string::npos; ++pos) {
      ++status_lines;
    }
    QR_FUZZ_CHECK(status_lines == 1);
    (void)qr::tools::ExitCodeFor(any);
    QR_FUZZ_CHECK(qr::IsValidUtf8(qr::tools::DumpStatus(any, 2)));
  }
  // The rendered text of the document built from this text, too.
  QR_FUZZ_CHECK(TerminalSafe(qr::tools::RenderStatusText(doc), /*newlines=*/true));
  return 0;
}
