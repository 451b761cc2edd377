// qrctl: the operator's view of quickreduce (status and cleanup).
//
//   qrctl status [--json] [--watch [--interval S] [--count N]] [--socket PATH]
//   qrctl gc [--dry-run] [--uid UID] [--socket PATH]
//
// Exit codes: 0 healthy, 1 degraded (a FAILED or stuck group, stale objects,
// a gc error), 2 no broker answers. The JSON schema is docs/qrctl.md.
// RunQrctl is the whole program with its streams injected, so tests run it
// in-process.
#ifndef QR_TOOLS_QRCTL_LIB_H_
#define QR_TOOLS_QRCTL_LIB_H_

#include <ostream>
#include <string>

#include "nlohmann/json.hpp"
#include "tools/qrctl_render.h"

namespace qr::tools {

// Runs qrctl with argv (argv[0] is the program name). Thread-compatible.
int RunQrctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace qr::tools

#endif  // QR_TOOLS_QRCTL_LIB_H_
