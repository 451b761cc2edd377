#include <signal.h>

#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "tests/e2e/harness.h"
#include "tests/reliability/ranks.h"
#include "tests/reliability/subcommands.h"
#include "tests/reliability/support.h"

namespace qr::testing::reliability {

namespace {

struct Trial {
  bool ok = false;
  double ms = 0;         // SIGKILL to the survivor's PEER_FAILED
  double reaped_ms = 0;  // SIGKILL to the victim reaped here
  int fds_before = 0, fds_after = 0;
  std::vector<std::string> left_over;  // the group's objects once it ended
  int broker_fds = -1;                 // after the group ended (-1: no broker)
  std::string note;
};

Trial RunPeerKill(Broker& broker, const std::string& setup, const WorkerFlags& base,
                  int fresh_broker_fds, std::mt19937& rng) {
  Trial t;
  if (!broker.running()) {
    if (Status s = broker.Start(); !s.ok()) {
      t.note = "broker: " + s.ToString();
      return t;
    }
  }
  auto ranks = SpawnRanks(base);
  if (!ranks.ok()) {
    t.note = ranks.status().ToString();
    return t;
  }
  const pid_t survivor = ranks->pids[0], victim = ranks->pids[1];
  auto fail = [&](const std::string& why) {
    WaitAll(ranks->pids, milliseconds(0));  // kills and reaps what still runs
    t.note = why;
    return t;
  };
  if (!AllReady(*ranks, milliseconds(120000))) return fail("the group did not form");
  if (setup == "restart" || setup == "none") {
    broker.Kill();
    if (setup == "restart") {
      if (Status s = broker.Start(); !s.ok()) return fail("restart: " + s.ToString());
      const bool adopted = WaitUntil(
          [&] {
            nlohmann::json g = broker.Group(base.group);
            return !g.is_null() && g.value("state", "") == "READY" && g.value("adopted", false);
          },
          milliseconds(5000));
      if (!adopted) return fail("the restarted broker did not adopt the group as READY");
    }
  }
  // Some calls after the last event, then a kill at a random point of a call.
  std::this_thread::sleep_for(milliseconds(20 + std::uniform_int_distribution<int>(0, 60)(rng)));
  if (WaitExit(survivor, milliseconds(0)).ok()) return fail("the survivor ended before the kill");
  const int64_t killed_at = MonotonicNanos();
  ::kill(victim, SIGKILL);
  auto victim_code = WaitExit(victim, milliseconds(10000));
  if (!victim_code.ok() || *victim_code != 128 + SIGKILL) return fail("the victim did not die");
  // Its exit (mappings torn down, then descriptors and locks dropped) as this
  // process's wait saw it, 2 ms polls.
  t.reaped_ms = static_cast<double>(MonotonicNanos() - killed_at) / 1e6;
  auto code = WaitExit(survivor, milliseconds(60000));
  if (!code.ok()) {
    ::kill(survivor, SIGKILL);
    (void)WaitExit(survivor, milliseconds(5000));
    return fail("the survivor did not see the kill within 60 s");
  }
  WorkerFlags f = base;
  f.rank = 0;
  const std::string result = ReadFile(RankFile(f, "result"));
  int status = -1;
  long long at = 0;
  int consumed = 0;
  if (*code != 0 || std::sscanf(result.c_str(), "%d %lld %d %d %n", &status, &at, &t.fds_before,
                                &t.fds_after, &consumed) < 4) {
    return fail("survivor exit " + std::to_string(*code) + ": " + result);
  }
  t.note = result.substr(static_cast<size_t>(consumed));
  if (!t.note.empty() && t.note.back() == '\n') t.note.pop_back();
  t.ms = static_cast<double>(at - killed_at) / 1e6;
  t.ok = status == static_cast<int>(StatusCode::kPeerFailed);
  if (!t.ok) t.note = "survivor got status " + std::to_string(status) + ": " + t.note;
  // A broker removes the ended group's objects; without one they stay until
  // the next broker starts (or qrctl gc).
  if (broker.running()) {
    WaitUntil([&] { return ShmObjectsContaining(base.group).empty(); }, milliseconds(3000));
    WaitUntil([&] { return broker.Group(base.group).is_null(); }, milliseconds(3000));
    // Our status queries' connections close on the broker's side a little
    // later.
    WaitUntil([&] { return OpenFds(broker.pid()) <= fresh_broker_fds; }, milliseconds(2000));
    t.broker_fds = OpenFds(broker.pid());
  }
  t.left_over = ShmObjectsContaining(base.group);
  return t;
}

}  // namespace

int PeerKill(const std::string& broker_bin, const std::string& setups_text,
             const std::string& sizes_text, int repeat, const std::string& regime, int device) {
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const int fresh_broker_fds = OpenFds(broker.pid());
  std::printf("broker %s (fresh: %d fds), %s, fp16 %s, world size 2\n", broker_bin.c_str(),
              fresh_broker_fds,
              device < 0 ? "host backend" : ("GPU " + std::to_string(device)).c_str(),
              regime.c_str());
  std::mt19937 rng(12345);
  const std::string token = UniqueToken().substr(0, 8);
  std::stringstream setups(setups_text);
  bool all_ok = true;
  std::vector<std::string> table;
  for (std::string setup; std::getline(setups, setup, ',');) {
    if (setup != "broker" && setup != "restart" && setup != "none") {
      std::fprintf(stderr, "unknown setup '%s' (broker, restart, none)\n", setup.c_str());
      return 64;
    }
    for (int mib : ParseList(sizes_text)) {
      std::vector<double> ms, reaped;
      int failures = 0, leaks = 0, fd_leaks = 0, broker_fd_max = -1;
      for (int i = 0; i < repeat; ++i) {
        WorkerFlags f;
        f.group = "pk-" + token + "-" + setup + "-" + std::to_string(mib) + "-" + std::to_string(i);
        f.dir = dir.path();
        f.count = static_cast<int64_t>(mib) << 19;  // fp16 values
        f.device = device;
        f.regime = regime;
        Trial t = RunPeerKill(broker, setup, f, fresh_broker_fds, rng);
        std::printf(
            "%-8s %4d MiB #%-3d %s %8.2f ms (victim reaped %6.2f ms)  survivor fds %d -> "
            "%d  left in /dev/shm: %zu%s  broker fds %d  | %s\n",
            setup.c_str(), mib, i, t.ok ? "PEER_FAILED" : "FAILED     ", t.ms, t.reaped_ms,
            t.fds_before, t.fds_after, t.left_over.size(),
            t.left_over.empty() ? "" : (" (" + t.left_over.front() + ", ...)").c_str(),
            t.broker_fds, t.note.c_str());
        std::fflush(stdout);
        if (!t.ok) {
          ++failures;
          continue;
        }
        ms.push_back(t.ms);
        reaped.push_back(t.reaped_ms);
        if (!t.left_over.empty()) ++leaks;
        if (t.fds_after != t.fds_before) ++fd_leaks;
        broker_fd_max = std::max(broker_fd_max, t.broker_fds);
        if (setup == "none") {
          // What a later broker does with them: its start-up sweep.
          if (!broker.StartOrSay()) return 2;
          if (!WaitUntil([&] { return ShmObjectsContaining(f.group).empty(); },
                         milliseconds(3000))) {
            std::printf("  still in /dev/shm after a broker start: %zu objects\n",
                        ShmObjectsContaining(f.group).size());
          }
        }
      }
      const Summary s = Summarise(ms), r = Summarise(reaped);
      char line[512];
      std::snprintf(line, sizeof(line),
                    "%-8s %4d MiB: n=%zu  min %.1f  median %.1f  max %.1f ms (victim reaped %.1f / "
                    "%.1f / %.1f);  failed trials %d, trials leaving objects %d, survivor fd "
                    "leaks %d, broker fds max %d",
                    setup.c_str(), mib, ms.size(), s.min, s.median, s.max, r.min, r.median, r.max,
                    failures, leaks, fd_leaks, broker_fd_max);
      table.push_back(line);
      all_ok = all_ok && failures == 0 && fd_leaks == 0 && (setup == "none" || leaks == 0) &&
               (broker_fd_max < 0 || broker_fd_max == fresh_broker_fds);
    }
  }
  std::printf("\nSIGKILL of rank 1 to rank 0's PEER_FAILED (fresh broker: %d fds)\n",
              fresh_broker_fds);
  for (const std::string& line : table) std::printf("%s\n", line.c_str());
  return all_ok ? 0 : 1;
}

}  // namespace qr::testing::reliability
