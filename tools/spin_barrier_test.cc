#include "tools/spin_barrier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace qr::tools {
namespace {

TEST(SpinBarrierTest, NoThreadLeavesARoundBeforeEveryThreadEnteredIt) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  SpinBarrier barrier(kThreads);
  std::atomic<int> entered{0};
  std::atomic<int> early{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        entered.fetch_add(1);
        barrier.Wait();
        // Every thread entered this round; none can have entered the round
        // after the next (it would have to pass the next Wait alone).
        const int seen = entered.load();
        if (seen < (round + 1) * kThreads || seen > (round + 2) * kThreads) early.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(entered.load(), kThreads * kRounds);
}

}  // namespace
}  // namespace qr::tools
