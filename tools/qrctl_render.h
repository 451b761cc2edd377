// qrctl's rendering of the broker's status document (docs/qrctl.md), apart
// from the rest of qrctl so the status fuzzer (ipc/fuzz) can build it alone.
// The document comes from another process: every function here accepts any
// JSON value, never throws, and prints strings escaped (EscapeForTerminal).
// Thread-safe.
#ifndef QR_TOOLS_QRCTL_RENDER_H_
#define QR_TOOLS_QRCTL_RENDER_H_

#include <string>

#include "nlohmann/json.hpp"

namespace qr::tools {

inline constexpr int kExitHealthy = 0;
inline constexpr int kExitDegraded = 1;
inline constexpr int kExitNoBroker = 2;

// Human-readable rendering: one line per fact, control characters escaped.
std::string RenderStatusText(const nlohmann::json& doc);
// kExitNoBroker without a broker object, kExitHealthy unless the document
// lists problems, else kExitDegraded.
int ExitCodeFor(const nlohmann::json& doc);
// The document as JSON text, valid UTF-8 whatever its strings hold.
std::string DumpStatus(const nlohmann::json& doc, int indent);

}  // namespace qr::tools

#endif  // QR_TOOLS_QRCTL_RENDER_H_
