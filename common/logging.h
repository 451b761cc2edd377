// Logging over spdlog, through the project's own logger.
//
// Code that can run inside libquickreduce (comm/, the client side of ipc/,
// common/) logs with Log().warn(...), Log().debug(...) etc., never through
// spdlog's default logger: in a host program that logger is the program's,
// which may have replaced it, set its level or pointed it at its own sinks.
// A daemon's own code may use spdlog::info(...): InitLogging makes Log() the
// default logger of the programs that call it. Log() is a logger named "quickreduce" that writes to
// stderr, each line tagged with the program name (in a library: "quickreduce") and the pid. Its
// level comes from QR_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default warn in a
// library). It is not registered with spdlog, so spdlog::set_level(), spdlog::get() and the host
// program's own loggers (one named "quickreduce" too) neither see nor change it.
//
// QR_LOG_FILE (as NCCL_DEBUG_FILE) sends Log()'s lines to a file instead of
// stderr, `%h` and `%p` in its value replaced by the host name and the pid.
//
// Daemons and tools, which own their process, call InitLogging once at start.
//
//   int main() {
//     qr::Status s = qr::InitLogging("qr-broker", "info");
//     ...
//     qr::Log().info("listening on {}", path);
#ifndef QR_COMMON_LOGGING_H_
#define QR_COMMON_LOGGING_H_

#include <spdlog/logger.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace qr {

// The project's logger. Created on first use at QR_LOG_LEVEL (warn when unset
// or invalid: LogLevelFromEnv reports an invalid value). Thread-safe; lives
// until the process exits.
spdlog::logger& Log();

// QR_LOG_LEVEL parsed (`fallback` when unset), or kInvalidArgument naming the
// variable and the allowed levels. Thread-safe.
[[nodiscard]] StatusOr<spdlog::level::level_enum> LogLevelFromEnv(
    spdlog::level::level_enum fallback = spdlog::level::warn);

// QR_LOG_FILE's expansion: `%h` -> host, `%p` -> pid, `%%` -> `%`; any other
// `%` stays as written. Pure; thread-safe.
std::string ExpandLogFilePath(std::string_view pattern, std::string_view host, long pid);

// For programs only (never called by the library): tags Log()'s lines with
// `program`, sets its level from QR_LOG_LEVEL, else `fallback`, and makes it
// spdlog's default logger as well, so the program's own spdlog::info(...)
// calls look the same. Thread-safe and idempotent (the last call's program
// name wins). Returns kInvalidArgument, naming QR_LOG_LEVEL, for a bad level;
// logging then stays at `fallback`.
Status InitLogging(std::string_view program, std::string_view fallback = "warn");

}  // namespace qr

#endif  // QR_COMMON_LOGGING_H_
