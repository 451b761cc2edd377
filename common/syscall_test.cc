#include "common/syscall.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

TEST(SyscallTest, SelfExecutablePathIsThisTest) {
  const std::string path = SelfExecutablePath();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front(), '/');
  EXPECT_EQ(path.substr(path.rfind('/') + 1), "syscall_test");
  EXPECT_EQ(::access(path.c_str(), X_OK), 0);
}

TEST(SyscallTest, RetryOnEintrRetriesUntilOtherResult) {
  int calls = 0;
  int rc = RetryOnEintr([&] {
    if (++calls < 3) {
      errno = EINTR;
      return -1;
    }
    return 7;
  });
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(calls, 3);
}

TEST(SyscallTest, SysCallNamesTheCallAndError) {
  auto r = SysCall("open(/nonexistent/x)", [] { return ::open("/nonexistent/x", O_RDONLY); });
  EXPECT_THAT(r,
              StatusIs(StatusCode::kUnavailable, HasSubstr("open(/nonexistent/x): No such file")));
}

Status CloseBad() {
  QR_SYS_RETURN_IF_ERROR(::close(-1));
  return OkStatus();
}

TEST(SyscallTest, MacroReturnsStatusWithCallText) {
  EXPECT_THAT(CloseBad(),
              StatusIs(StatusCode::kInternal, HasSubstr("::close(-1): Bad file descriptor")));
}

TEST(SyscallTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoToStatus(EEXIST, "x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoToStatus(EINVAL, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrnoToStatus(ETIMEDOUT, "x").code(), StatusCode::kTimeout);
  EXPECT_EQ(ErrnoToStatus(EPIPE, "x").code(), StatusCode::kPeerFailed);
  EXPECT_EQ(ErrnoToStatus(EIO, "x").code(), StatusCode::kInternal);
}

void OnAlarm(int) {}

TEST(SyscallTest, ReadSurvivesSignalInterruption) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  struct sigaction sa = {};
  sa.sa_handler = OnAlarm;  // no SA_RESTART: read() returns EINTR
  ASSERT_EQ(::sigaction(SIGALRM, &sa, nullptr), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::usleep(300 * 1000);
    char c = 'z';
    _exit(::write(fds[1], &c, 1) == 1 ? 0 : 1);
  }
  itimerval t = {};
  t.it_value.tv_usec = 50 * 1000;
  ASSERT_EQ(::setitimer(ITIMER_REAL, &t, nullptr), 0);
  char c = 0;
  auto n = SysCall("read", [&] { return ::read(fds[0], &c, 1); });
  ASSERT_OK(n.status());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(c, 'z');
  ::close(fds[0]);
  ::close(fds[1]);
  int st = 0;
  ::waitpid(child, &st, 0);
}

}  // namespace
}  // namespace qr
