#include "comm/bounded_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using std::chrono::milliseconds;

TEST(BoundedWaitTest, ReturnsOkOnceReady) {
  std::atomic<int> flag{0};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(20));
    flag.store(1, std::memory_order_release);
  });
  EXPECT_OK(BoundedWait([&] { return flag.load(std::memory_order_acquire) == 1; },
                        [] { return false; }, WaitClock::now() + milliseconds(5000), "flag"));
  setter.join();
}

TEST(BoundedWaitTest, AbortWinsQuickly) {
  std::atomic<int> abort_word{0};
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(20));
    abort_word.store(1);
  });
  const auto start = WaitClock::now();
  EXPECT_THAT(BoundedWait([] { return false; }, [&] { return abort_word.load() != 0; },
                          WaitClock::now() + milliseconds(10000), "peer 1"),
              StatusIs(StatusCode::kPeerFailed, ::testing::HasSubstr("peer 1")));
  EXPECT_LT(WaitClock::now() - start, milliseconds(1000));
  aborter.join();
}

TEST(BoundedWaitTest, TimesOutAtDeadline) {
  const auto start = WaitClock::now();
  EXPECT_THAT(BoundedWait([] { return false; }, [] { return false; },
                          WaitClock::now() + milliseconds(50), "nothing"),
              StatusIs(StatusCode::kTimeout, ::testing::HasSubstr("nothing")));
  const auto waited = WaitClock::now() - start;
  EXPECT_GE(waited, milliseconds(50));
  EXPECT_LT(waited, milliseconds(1000));
}

}  // namespace
}  // namespace qr
