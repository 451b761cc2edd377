#include "common/logging.h"

#include <limits.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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

std::string HostName() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

// QR_LOG_FILE's sink, or stderr's (with `why` set) when it is unset or cannot
// be opened. The file is opened with fopen rather than spdlog's file sink,
// which throws; it stays open for the life of the process, line-buffered so
// a crash loses at most the line being written.
std::shared_ptr<spdlog::sinks::sink> MakeSink(std::string* why) {
  const std::string pattern = kEnvLogFile.String();
  if (pattern.empty()) return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  const std::string path = ExpandLogFilePath(pattern, HostName(), static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(path.c_str(), "ae");  // append, O_CLOEXEC
  if (f == nullptr) {
    *why =
        "QR_LOG_FILE: cannot open '" + path + "' (" + std::strerror(errno) + "); logging to stderr";
    return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
  std::setvbuf(f, nullptr, _IOLBF, 0);
  return std::make_shared<spdlog::sinks::stdout_sink_base<spdlog::details::console_mutex>>(f);
}

// Built here rather than through spdlog's factories: those register the
// logger by name (and throw when the name is taken, by the host program say).
std::shared_ptr<spdlog::logger> MakeLogger() {
  std::string why;
  auto logger = std::make_shared<spdlog::logger>("quickreduce", MakeSink(&why));
  logger->set_pattern(Pattern("quickreduce"));
  logger->flush_on(spdlog::level::warn);
  StatusOr<spdlog::level::level_enum> level = LogLevelFromEnv();
  logger->set_level(level.ok() ? *level : spdlog::level::warn);
  if (!why.empty()) logger->warn("{}", why);
  return logger;
}

const std::shared_ptr<spdlog::logger>& Shared() {
  static const std::shared_ptr<spdlog::logger> logger = MakeLogger();
  return logger;
}

}  // namespace

spdlog::logger& Log() { return *Shared(); }

std::string ExpandLogFilePath(std::string_view pattern, std::string_view host, long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[i + 1]) {
      case 'h':
        out += host;
        break;
      case 'p':
        out += std::to_string(pid);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += pattern.substr(i, 2);
        break;
    }
    ++i;
  }
  return out;
}

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
