#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "tests/e2e/harness.h"
#include "tests/reliability/subcommands.h"
#include "tests/reliability/support.h"

namespace qr::testing::reliability {

namespace {

void Snapshot(const char* when, int cycle, double seconds, const Broker& broker,
              const std::string& group) {
  std::printf(
      "%-7s cycle %6d  %7.1f s  broker RSS %6ld KiB, %3d fds  |  ours RSS %6ld KiB, %3d "
      "fds  |  /dev/shm: %zu of the group, %zu of this uid, %zu entries\n",
      when, cycle, seconds, RssKiB(broker.pid()), OpenFds(broker.pid()), RssKiB(::getpid()),
      OpenFds(::getpid()), ShmObjectsContaining(group).size(), OurShmObjects().size(),
      ShmEntries());
  std::fflush(stdout);
}

}  // namespace

int Cycles(const std::string& broker_bin, int cycles, double minutes, int snapshot_every,
           int world_size) {
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const std::string group = "cycles-" + UniqueToken().substr(0, 8);
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(minutes * 60));
  constexpr int kWarmup = 20;
  Barrier barrier(world_size);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<double> cycle_ms, join_ms, leave_ms;
  // Reserved: the samples must not show up as our own growth.
  for (auto* v : {&cycle_ms, &join_ms, &leave_ms}) v->reserve(static_cast<size_t>(cycles) + 1);
  int done = 0;
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      JoinOptions o;
      o.group = group;
      o.rank = rank;
      o.world_size = world_size;
      o.timeout_ms = 30000;
      for (int i = 0;; ++i) {
        barrier.Wait();
        if (rank == 0) {
          if (i == kWarmup) Snapshot("before", 0, seconds(), broker, group);
          if (i > kWarmup && (i - kWarmup) % snapshot_every == 0) {
            Snapshot("during", i - kWarmup, seconds(), broker, group);
          }
          if (i - kWarmup >= cycles || Clock::now() >= stop_at || failures > 0) stop = true;
        }
        barrier.Wait();
        if (stop) return;
        const auto t0 = Clock::now();
        auto c = Communicator::Join(o);
        const auto t1 = Clock::now();
        if (c.ok()) {
          if (!(*c)->Leave().ok()) ++failures;
          c->reset();
        } else {
          std::fprintf(stderr, "cycle %d rank %d: %s\n", i, rank, c.status().ToString().c_str());
          ++failures;
        }
        const auto t2 = Clock::now();
        barrier.Wait();  // all left: the cycle ends here
        if (rank == 0 && i >= kWarmup) {
          cycle_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          join_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          leave_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
          done = i - kWarmup + 1;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The broker removes the last generation's segment when it sees both leave.
  WaitUntil([&] { return ShmObjectsContaining(group).empty(); }, milliseconds(3000));
  Snapshot("after", done, seconds(), broker, group);
  const Summary c = Summarise(cycle_ms), j = Summarise(join_ms), l = Summarise(leave_ms);
  std::printf("%d cycles (host backend, world size %d) in %.1f s, %d failures\n", done, world_size,
              seconds(), failures.load());
  std::printf("cycle  min %.1f  median %.1f  max %.1f ms\n", c.min, c.median, c.max);
  std::printf("join   min %.1f  median %.1f  max %.1f ms (rank 0, to READY)\n", j.min, j.median,
              j.max);
  std::printf("leave  min %.1f  median %.1f  max %.1f ms (rank 0)\n", l.min, l.median, l.max);
  std::printf("group objects left: %zu\n", ShmObjectsContaining(group).size());
  return failures == 0 && ShmObjectsContaining(group).empty() ? 0 : 1;
}

}  // namespace qr::testing::reliability
