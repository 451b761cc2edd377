// qr-flood-bench: the figures of docs/broker.md "Reliability" (broker side).
//
//   qr-flood-bench [--groups 300] [--burst 8192] [--connections 20000]
//                  [--other-uid 65534] [--repeat 20]
// Starts the broker under test ($QR_TEST_BROKER_BIN, else the runfile) on a
// fresh socket, puts `groups` live segments of another broker in /dev/shm,
// and prints one line per figure: STATUS latency, join (formation) latency
// idle, right after a burst of pipelined STATUS, and while `connections`
// connections of another uid (root only; else ours) are held open, with the
// broker's descriptors and RSS.
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "ipc/broker_client.h"
#include "tests/broker/harness.h"

namespace qr::testing {
namespace {

using Ms = std::chrono::milliseconds;

struct Stats {
  double min, median, max;
};

Stats Summarise(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0};
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

void Print(const char* what, const std::vector<double>& ms) {
  Stats s = Summarise(ms);
  std::printf("%-52s min %8.2f  median %8.2f  max %8.2f ms  (n=%zu)\n", what, s.min, s.median,
              s.max, ms.size());
}

double Ms1(std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1000.0; }

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

int Main(int argc, char** argv) {
  CLI::App app{"broker flood figures"};
  int groups = 300, burst = 8192, connections = 20000, repeat = 20;
  int64_t other_uid = 65534;
  app.add_option("--groups", groups, "live segments of another broker in /dev/shm");
  app.add_option("--burst", burst, "bytes of pipelined STATUS per burst");
  app.add_option("--connections", connections, "connections held open by the flooder");
  app.add_option("--other-uid", other_uid, "flooder's uid when run as root (-1: ours)");
  app.add_option("--repeat", repeat, "samples per figure");
  CLI11_PARSE(app, argc, argv);

  TempDir dir;
  const std::string socket = dir.path() + "/broker.sock";
  auto busy = LiveForeignSegments(groups, dir.path() + "/other.sock");
  BrokerProcess broker(BrokerBinary(), socket);
  if (Status up = broker.Start(); !up.ok()) {
    std::fprintf(stderr, "%s\n", up.ToString().c_str());
    return 1;
  }
  std::printf("broker %s, %zu live segments in /dev/shm\n", BrokerBinary().c_str(), busy.size());

  std::vector<double> status_ms, idle_ms, flood_ms;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!ipc::QueryStatus(socket, Ms(10000)).ok()) return 1;
    status_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  Print("STATUS round trip", status_ms);
  for (int i = 0; i < repeat; ++i) {
    auto t = TimeFormation(socket, UniqueGroup("idle"), Ms(30000));
    if (!t.ok()) return 1;
    idle_ms.push_back(Ms1(*t));
  }
  Print("join to READY, idle", idle_ms);
  auto frames = StatusBurst(static_cast<size_t>(burst));
  for (int i = 0; i < std::max(1, repeat / 4); ++i) {
    int f = ConnectRaw(socket);
    if (f < 0) return 1;
    ::send(f, frames.data(), frames.size(), MSG_NOSIGNAL);
    auto t = TimeFormation(socket, UniqueGroup("burst"), Ms(60000));
    ::close(f);
    if (!t.ok()) {
      std::printf("join under a STATUS burst failed: %s\n", t.status().ToString().c_str());
      return 1;
    }
    flood_ms.push_back(Ms1(*t));
  }
  std::string what = "join to READY after " + std::to_string(burst) + " B of pipelined STATUS";
  Print(what.c_str(), flood_ms);

  // The connection flood, from a child that holds its connections.
  bool foreign = ::getuid() == 0 && other_uid >= 0;
  if (foreign) {
    ::chmod(dir.path().c_str(), 0777);
    ::chmod(socket.c_str(), 0777);
  }
  int fds_before = CountOpenFds(broker.pid());
  long rss_before = RssKiB(broker.pid());
  Pipe opened, done;
  pid_t child = ForkChild([&] {
    if (foreign && (::setgid(static_cast<gid_t>(other_uid)) != 0 ||
                    ::setuid(static_cast<uid_t>(other_uid)) != 0)) {
      return 2;
    }
    rlimit lim{static_cast<rlim_t>(connections + 64), static_cast<rlim_t>(connections + 64)};
    ::setrlimit(RLIMIT_NOFILE, &lim);
    std::vector<int> held;
    // A full accept backlog says EAGAIN: retry for up to 20 s in all.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
    while (static_cast<int>(held.size()) < connections &&
           std::chrono::steady_clock::now() < give_up) {
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        ::close(fd);
        ::usleep(200);
        continue;
      }
      held.push_back(fd);
    }
    int32_t n = static_cast<int32_t>(held.size());
    opened.Write(&n, sizeof(n));
    char c;
    done.Read(&c, 1, Ms(120000));
    return 0;
  });
  int32_t n = 0;
  if (!opened.Read(&n, sizeof(n), Ms(120000))) return 1;
  std::vector<double> under;
  int failed = 0;
  int fds_peak = 0;
  for (int i = 0; i < std::max(1, repeat / 4); ++i) {
    fds_peak = std::max(fds_peak, CountOpenFds(broker.pid()));
    auto t = TimeFormation(socket, UniqueGroup("conns"), Ms(30000));
    if (t.ok()) {
      under.push_back(Ms1(*t));
    } else {
      ++failed;
    }
  }
  long rss_during = RssKiB(broker.pid());
  char c = 'x';
  done.Write(&c, 1);
  WaitChild(child);
  std::printf("connection flood: %d connections opened by uid %lld\n", n,
              static_cast<long long>(foreign ? other_uid : ::getuid()));
  what = "join to READY during the connection flood";
  Print(what.c_str(), under);
  std::printf(
      "  joins that failed: %d; broker fds %d before, %d peak; RSS %ld KiB before, "
      "%ld KiB during\n",
      failed, fds_before, fds_peak, rss_before, rss_during);
  std::printf("broker alive afterwards: %s\n", ::kill(broker.pid(), 0) == 0 ? "yes" : "no");
  return 0;
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) { return qr::testing::Main(argc, argv); }
