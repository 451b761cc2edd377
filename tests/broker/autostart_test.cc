// Autostart: 8 clients start at once with no broker; exactly one broker wins
// and all 8 form one group through it.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using ipc::GroupMembership;

// Pids of qr-broker processes serving `socket`.
std::vector<pid_t> BrokersFor(const std::string& socket) {
  std::vector<pid_t> pids;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (cmd.find("qr-broker") != std::string::npos && cmd.find(socket) != std::string::npos &&
        ipc::ProcessAlive(pid)) {
      pids.push_back(pid);
    }
  }
  ::closedir(d);
  return pids;
}

// How many of pid's descriptors refer to `target` (a path, as /proc shows it).
int CountFdsTo(pid_t pid, const std::string& target) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    char link[4096];
    ssize_t len = ::readlink((dir + "/" + e->d_name).c_str(), link, sizeof(link));
    n += len > 0 && std::string(link, static_cast<size_t>(len)) == target;
  }
  ::closedir(d);
  return n;
}

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream f(path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(AutostartTest, EightRacingClientsStartExactlyOneBroker) {
  TempDir dir;
  const std::string socket = dir.path() + "/broker.sock";
  // Whatever happens below, no autostarted broker outlives the test.
  struct Reaper {
    std::string socket;
    ~Reaper() {
      for (pid_t pid : BrokersFor(socket)) ::kill(pid, SIGKILL);
    }
  } reaper{socket};
  ::setenv("QR_BROKER_BIN", BrokerBinary().c_str(), 1);
  // A descriptor of the clients (inherited, not close-on-exec) that the
  // daemon they start must not keep open.
  const std::string marker = dir.path() + "/client-marker";
  int marker_fd = ::open(marker.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(marker_fd, 0);
  const std::string group = UniqueGroup("race");
  Pipe pipe;
  std::vector<pid_t> kids;
  for (int r = 0; r < 8; ++r) {
    kids.push_back(ForkChild([&, r] {
      ipc::JoinParams p = HostJoin(socket, group, r, 8);
      p.autostart = true;
      auto m = GroupMembership::Join(p);
      int32_t broker = 0;
      if (m.ok() && (*m)->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(r)).ok()) {
        broker = (*m)->broker_pid();
      } else if (!m.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, m.status().ToString().c_str());
      }
      pipe.Write(&broker, sizeof(broker));
      if (m.ok()) (void)(*m)->Leave();
      return broker > 0 ? 0 : 1;
    }));
  }
  std::set<int32_t> brokers;
  for (int r = 0; r < 8; ++r) {
    int32_t b = 0;
    ASSERT_TRUE(pipe.Read(&b, sizeof(b), std::chrono::seconds(20)));
    brokers.insert(b);
  }
  for (pid_t k : kids) EXPECT_EQ(WaitChild(k), 0);
  const std::string log = socket + ".log";
  {
    std::ifstream f(log);
    std::stringstream text;
    text << f.rdbuf();
    std::printf("broker log:\n%s\n", text.str().c_str());
  }
  ASSERT_EQ(brokers.size(), 1u);
  const pid_t winner = *brokers.begin();
  EXPECT_GT(winner, 0);
  // Losers exit at once; only the winner keeps serving the socket.
  EXPECT_TRUE(WaitFor([&] { return BrokersFor(socket) == std::vector<pid_t>{winner}; },
                      std::chrono::seconds(3)));
  ::close(marker_fd);
  EXPECT_EQ(CountFdsTo(winner, marker), 0) << "the broker kept a client's descriptor";
  EXPECT_EQ(CountFdsTo(winner, log), 2) << "stdout and stderr only";
  EXPECT_EQ(CountLines(log, "listening on"), 1);
  int losers = CountLines(log, "another broker is running");
  std::printf("8 racing clients: broker pid %d won, %d started brokers lost\n", winner, losers);

  ::kill(winner, SIGTERM);
  EXPECT_TRUE(WaitFor([&] { return !ipc::ProcessAlive(winner); }, std::chrono::seconds(5)));
  ::unsetenv("QR_BROKER_BIN");
}

TEST(AutostartTest, EnvironmentSwitch) {
  ::unsetenv("QR_BROKER_AUTOSTART");
  ASSERT_OK_AND_ASSIGN(bool on, ipc::AutostartFromEnv());
  EXPECT_TRUE(on);
  ::setenv("QR_BROKER_AUTOSTART", "0", 1);
  ASSERT_OK_AND_ASSIGN(on, ipc::AutostartFromEnv());
  EXPECT_FALSE(on);
  ::setenv("QR_BROKER_AUTOSTART", "maybe", 1);
  EXPECT_THAT(ipc::AutostartFromEnv().status(),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("QR_BROKER_AUTOSTART")));
  ::unsetenv("QR_BROKER_AUTOSTART");
}

TEST(AutostartTest, MissingBinaryIsAClearError) {
  TempDir dir;
  ::setenv("QR_BROKER_BIN", "/nonexistent/qr-broker", 1);
  ipc::JoinParams p = HostJoin(dir.path() + "/broker.sock", UniqueGroup("nobin"), 0, 2);
  p.autostart = true;
  EXPECT_THAT(GroupMembership::Join(p).status(),
              StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("QR_BROKER_BIN")));
  ::unsetenv("QR_BROKER_BIN");
}

}  // namespace
}  // namespace qr::testing
