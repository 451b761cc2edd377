// Logging setup over spdlog. Code logs with spdlog::info(...) etc.; programs
// call InitLogging once at start. The level comes from QR_LOG_LEVEL
// (trace, debug, info, warn, error, critical, off; default warn for libraries,
// the `fallback` given here for daemons and tools). Output goes to stderr,
// each line tagged with the program name and pid.
#ifndef QR_COMMON_LOGGING_H_
#define QR_COMMON_LOGGING_H_

#include <string_view>

#include "common/status.h"

namespace qr {

// Thread-safe and idempotent (the last call's program name wins). Returns
// kInvalidArgument, naming QR_LOG_LEVEL, for a bad level; logging then stays at
// `fallback`.
Status InitLogging(std::string_view program, std::string_view fallback = "warn");

}  // namespace qr

#endif  // QR_COMMON_LOGGING_H_
