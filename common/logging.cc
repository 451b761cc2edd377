#include "common/logging.h"

#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/env.h"

namespace qr {

Status InitLogging(std::string_view program, std::string_view fallback) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // Not through spdlog's factory: it throws when the name is registered already.
  auto logger = std::make_shared<spdlog::logger>(
      "quickreduce", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + std::string(program) + ":%P] [%l] %v");
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  auto level = ParseChoice("fallback log level", fallback,
                           {"trace", "debug", "info", "warn", "error", "critical", "off"});
  spdlog::set_level(spdlog::level::from_str(level.ok() ? *level : "warn"));
  auto requested = EnvChoice({"QR_LOG_LEVEL"}, std::string(fallback),
                             {"trace", "debug", "info", "warn", "error", "critical", "off"});
  if (!requested.ok()) return requested.status();
  spdlog::set_level(spdlog::level::from_str(*requested));
  return OkStatus();
}

}  // namespace qr
