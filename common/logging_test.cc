#include "common/logging.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <sstream>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

// Runs first in this binary (gtest keeps declaration order): Log() before any
// InitLogging, as inside the library.
TEST(LoggingTest, LibraryLoggerIsNeitherRegisteredNorTheDefault) {
  auto before = spdlog::default_logger();
  Log().warn("first use");
  EXPECT_EQ(Log().name(), "quickreduce");
  EXPECT_EQ(spdlog::get("quickreduce"), nullptr);
  EXPECT_EQ(spdlog::default_logger(), before);
  EXPECT_NE(spdlog::default_logger().get(), &Log());
  // The host program's level changes leave the library's alone.
  const auto level = Log().level();
  spdlog::set_level(spdlog::level::off);
  EXPECT_EQ(Log().level(), level);
  spdlog::set_level(spdlog::level::info);
}

TEST(LoggingTest, LogFilePathExpandsHostAndPidAsNcclDebugFile) {
  EXPECT_EQ(ExpandLogFilePath("/tmp/qr.%h.%p.log", "node7", 4242), "/tmp/qr.node7.4242.log");
  EXPECT_EQ(ExpandLogFilePath("%p-%p", "h", 1), "1-1");
  EXPECT_EQ(ExpandLogFilePath("100%%-%h", "h", 1), "100%-h");
  // Other conversions and a trailing % are kept as written.
  EXPECT_EQ(ExpandLogFilePath("a%db%", "h", 1), "a%db%");
  EXPECT_EQ(ExpandLogFilePath("plain.log", "h", 1), "plain.log");
}

TEST(LoggingTest, LevelFromEnvironment) {
  ::setenv("QR_LOG_LEVEL", "debug", 1);
  ASSERT_OK(InitLogging("logging_test"));
  EXPECT_EQ(Log().level(), spdlog::level::debug);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);  // the program's default is Log()
  ::setenv("QR_LOG_LEVEL", "ERROR", 1);
  ASSERT_OK(InitLogging("logging_test"));
  EXPECT_EQ(Log().level(), spdlog::level::err);
  ::unsetenv("QR_LOG_LEVEL");
}

TEST(LoggingTest, FallbackWhenUnset) {
  ::unsetenv("QR_LOG_LEVEL");
  ASSERT_OK(InitLogging("logging_test", "info"));
  EXPECT_EQ(Log().level(), spdlog::level::info);
  EXPECT_EQ(spdlog::default_logger().get(), &Log());
}

TEST(LoggingTest, BadLevelNamesTheVariable) {
  ::setenv("QR_LOG_LEVEL", "loud", 1);
  EXPECT_THAT(InitLogging("logging_test", "warn"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_LOG_LEVEL='loud'")));
  EXPECT_EQ(Log().level(), spdlog::level::warn);
  EXPECT_THAT(LogLevelFromEnv(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("off")));
  ::unsetenv("QR_LOG_LEVEL");
  ASSERT_OK_AND_ASSIGN(auto level, LogLevelFromEnv(spdlog::level::critical));
  EXPECT_EQ(level, spdlog::level::critical);
  ::setenv("QR_LOG_LEVEL", "off", 1);
  ASSERT_OK_AND_ASSIGN(level, LogLevelFromEnv());
  EXPECT_EQ(level, spdlog::level::off);
  ::unsetenv("QR_LOG_LEVEL");
}

TEST(LoggingTest, LogsToStderrWithProgramName) {
  ::unsetenv("QR_LOG_LEVEL");
  ASSERT_OK(InitLogging("tagged", "info"));
  ::testing::internal::CaptureStderr();
  Log().info("hello {}", 7);
  spdlog::info("program {}", 8);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("[tagged:"));
  EXPECT_THAT(err, HasSubstr("hello 7"));
  EXPECT_THAT(err, HasSubstr("program 8"));
}

}  // namespace
}  // namespace qr
