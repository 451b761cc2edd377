#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/env_vars.h"

namespace qr {
namespace {

// spdlog's level names, in level_enum order.
const std::vector<std::string>& LevelNames() {
  static const std::vector<std::string> names = kEnvLogLevel.ChoiceList();
  return names;
}

std::string Pattern(std::string_view program) {
  return "[%Y-%m-%d %H:%M:%S.%e] [" + std::string(program) + ":%P] [%l] %v";
}

// Built here rather than through spdlog's factories: those register the
// logger by name (and throw when the name is taken, by the host program say).
std::shared_ptr<spdlog::logger> MakeLogger() {
  auto logger = std::make_shared<spdlog::logger>("quickreduce",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern(Pattern("quickreduce"));
  logger->flush_on(spdlog::level::warn);
  StatusOr<spdlog::level::level_enum> level = LogLevelFromEnv();
  logger->set_level(level.ok() ? *level : spdlog::level::warn);
  return logger;
}

const std::shared_ptr<spdlog::logger>& Shared() {
  static const std::shared_ptr<spdlog::logger> logger = MakeLogger();
  return logger;
}

}  // namespace

spdlog::logger& Log() { return *Shared(); }

StatusOr<spdlog::level::level_enum> LogLevelFromEnv(spdlog::level::level_enum fallback) {
  StatusOr<std::string> name = kEnvLogLevel.Choice(LevelNames()[fallback]);
  if (!name.ok()) return name.status();
  return spdlog::level::from_str(*name);
}

Status InitLogging(std::string_view program, std::string_view fallback) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::shared_ptr<spdlog::logger>& logger = Shared();
  logger->set_pattern(Pattern(program));
  StatusOr<std::string> base = ParseChoice("fallback log level", fallback, LevelNames());
  const spdlog::level::level_enum fallback_level =
      spdlog::level::from_str(base.ok() ? *base : "warn");
  StatusOr<spdlog::level::level_enum> level = LogLevelFromEnv(fallback_level);
  logger->set_level(level.ok() ? *level : fallback_level);
  spdlog::set_default_logger(logger);
  return level.ok() ? OkStatus() : level.status();
}

}  // namespace qr
