#include "common/logging.h"

#include <cstdlib>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

TEST(LoggingTest, LevelFromEnvironment) {
  ::setenv("QR_LOG_LEVEL", "debug", 1);
  ASSERT_OK(InitLogging("logging_test"));
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  ::setenv("QR_LOG_LEVEL", "ERROR", 1);
  ASSERT_OK(InitLogging("logging_test"));
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
}

TEST(LoggingTest, FallbackWhenUnset) {
  ::unsetenv("QR_LOG_LEVEL");
  ASSERT_OK(InitLogging("logging_test", "info"));
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST(LoggingTest, BadLevelNamesTheVariable) {
  ::setenv("QR_LOG_LEVEL", "loud", 1);
  EXPECT_THAT(InitLogging("logging_test", "warn"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_LOG_LEVEL='loud'")));
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  ::unsetenv("QR_LOG_LEVEL");
}

TEST(LoggingTest, LogsToStderrWithProgramName) {
  ::unsetenv("QR_LOG_LEVEL");
  ASSERT_OK(InitLogging("tagged", "info"));
  ::testing::internal::CaptureStderr();
  spdlog::info("hello {}", 7);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("[tagged:"));
  EXPECT_THAT(err, HasSubstr("hello 7"));
}

}  // namespace
}  // namespace qr
