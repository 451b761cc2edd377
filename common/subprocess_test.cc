#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(SubprocessTest, ExitCodeComesBack) {
  StatusOr<pid_t> pid = Spawn({"/bin/sh", "-c", "exit 3"});
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  StatusOr<int> code = WaitExit(*pid, seconds(10));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 3);
}

TEST(SubprocessTest, EnvironmentIsAddedAndOverridden) {
  ::setenv("QR_SUBPROCESS_TEST_A", "old", 1);
  StatusOr<pid_t> pid =
      Spawn({"/bin/sh", "-c",
             "test \"$QR_SUBPROCESS_TEST_A\" = new && test \"$QR_SUBPROCESS_TEST_B\" = b"},
            {"QR_SUBPROCESS_TEST_A=new", "QR_SUBPROCESS_TEST_B=b"});
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*WaitExit(*pid, seconds(10)), 0);
  ::unsetenv("QR_SUBPROCESS_TEST_A");
}

TEST(SubprocessTest, KilledChildReports128PlusSignal) {
  StatusOr<pid_t> pid = Spawn({"/bin/sh", "-c", "sleep 30"});
  ASSERT_TRUE(pid.ok());
  StatusOr<int> early = WaitExit(*pid, milliseconds(50));
  EXPECT_EQ(early.status().code(), StatusCode::kTimeout);
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  EXPECT_EQ(*WaitExit(*pid, seconds(10)), 128 + SIGKILL);
}

TEST(SubprocessTest, BadArguments) {
  EXPECT_EQ(Spawn({}).status().code(), StatusCode::kInvalidArgument);
  StatusOr<pid_t> pid = Spawn({"/nonexistent/qr-subprocess-test"});
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*WaitExit(*pid, seconds(10)), 127);
}

}  // namespace
}  // namespace qr
