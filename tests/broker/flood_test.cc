// The broker keeps serving joins when connections flood it: idle and
// half-sent connections time out, connections are capped in total and per
// uid (another uid cannot use up the broker's descriptors), and a peer
// pipelining STATUS gets no more than its turn.
//
// Runs in a private /dev/shm (EnterPrivateShm, root): the status-flood test
// fills it with live segments.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/broker_client.h"
#include "ipc/group_client.h"
#include "ipc/wire.h"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using ipc::GroupMembership;
using ::testing::HasSubstr;
using Ms = std::chrono::milliseconds;

class FloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = EnterPrivateShm();
    if (!why.empty()) GTEST_SKIP() << "private /dev/shm: " << why;
  }
  void StartBroker(std::vector<std::string> args = {}) {
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), socket(), std::move(args));
    ASSERT_OK(broker_->Start());
  }
  std::string socket() const { return dir_.path() + "/broker.sock"; }
  bool BrokerAlive() { return broker_ && ::kill(broker_->pid(), 0) == 0; }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

TEST_F(FloodTest, IdleAndHalfSentConnectionsAreDroppedMembersAreNot) {
  StartBroker({"--request-timeout-ms", "300"});
  const std::string group = UniqueGroup("idle");
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(HostJoin(socket(), group, 0, 2)));
  auto start = std::chrono::steady_clock::now();
  int idle = ConnectRaw(socket());
  int half = ConnectRaw(socket());
  ASSERT_GE(idle, 0);
  ASSERT_GE(half, 0);
  auto frame = StatusBurst(ipc::kFrameHeaderBytes);
  ASSERT_EQ(::send(half, frame.data(), 6, MSG_NOSIGNAL), 6);  // half a header
  bool idle_eof = false, half_eof = false;
  ReadUntilEof(idle, Ms(3000), &idle_eof);
  ReadUntilEof(half, Ms(3000), &half_eof);
  auto took = std::chrono::steady_clock::now() - start;
  ::close(idle);
  ::close(half);
  EXPECT_TRUE(idle_eof) << "an idle connection was kept";
  EXPECT_TRUE(half_eof) << "a half-sent frame was waited for";
  EXPECT_LT(took, Ms(2000));
  // Rank 0 has waited longer than the timeout for its peer: still a member.
  std::this_thread::sleep_for(Ms(400));
  ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(HostJoin(socket(), group, 1, 2)));
  EXPECT_OK(PublishBoth(*m0, *m1));
  EXPECT_TRUE(BrokerAlive());
}

// At the cap, a new connection of our uid takes the place of the longest idle
// one (which is told why): idle connections cannot lock out a join.
TEST_F(FloodTest, ConnectionCapDropsTheLongestIdleWithAReason) {
  StartBroker({"--max-connections", "16", "--request-timeout-ms", "60000"});
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    int fd = ConnectRaw(socket());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  // The connects are done; the broker accepts them from its backlog at its
  // own pace, which on a loaded machine takes longer than any fixed wait per
  // connection. The first 24 must go, oldest first: each is waited for (one
  // deadline for all) until it is told and closed. The 24th goes when the
  // 40th is accepted, so after it the last 16 have all been accepted, and
  // are still open.
  const auto deadline = std::chrono::steady_clock::now() + Ms(5000);
  int refused = 0;
  std::string reason;
  for (size_t i = 0; i < 24; ++i) {
    bool eof = false;
    auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now());
    auto got = ReadUntilEof(fds[i], std::max(left, Ms(1)), &eof);
    EXPECT_TRUE(eof) << "connection " << i << " was kept";
    if (!eof) continue;
    ++refused;
    size_t consumed = 0;
    auto m = ipc::TryDecodeFrame(got.data(), got.size(), &consumed);
    if (m.ok() && m->has_value()) {
      if (auto* e = std::get_if<ipc::ErrorReply>(&**m)) reason = e->message;
    }
  }
  EXPECT_EQ(refused, 40 - 16);
  EXPECT_THAT(reason, HasSubstr("limit of 16 connections"));
  for (size_t i = 24; i < fds.size(); ++i) {
    bool eof = false;
    ReadUntilEof(fds[i], Ms(10), &eof);
    EXPECT_FALSE(eof) << "connection " << i << " was dropped";
  }
  // With the 16 idle ones still open, a group forms (its members evict them).
  auto t = TimeFormation(socket(), UniqueGroup("at-cap"), Ms(5000));
  EXPECT_OK(t.status());
  for (int fd : fds) ::close(fd);
}

// Another uid (which the broker only tells no) opens 3000 connections at a
// broker whose descriptor limit starts at 256: joins of the broker's own uid
// must still be served at once.
TEST_F(FloodTest, AnotherUidsFloodDoesNotStarveJoins) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to setuid";
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(256, saved.rlim_cur);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  StartBroker();  // inherits the low limit
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(socket().c_str(), 0777), 0);
  Pipe opened, done;
  pid_t child = ForkChild([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      int32_t n = -1;
      opened.Write(&n, sizeof(n));
      return 0;
    }
    rlimit lim{8192, 8192};
    ::setrlimit(RLIMIT_NOFILE, &lim);
    std::vector<int> fds;
    for (int i = 0; i < 3000; ++i) {
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, socket().c_str(), sizeof(addr.sun_path) - 1);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        ::close(fd);
        continue;
      }
      fds.push_back(fd);
    }
    int32_t n = static_cast<int32_t>(fds.size());
    opened.Write(&n, sizeof(n));
    char c;
    done.Read(&c, 1, Ms(20000));  // hold them until the parent has joined
    return 0;
  });
  int32_t n = 0;
  ASSERT_TRUE(opened.Read(&n, sizeof(n), Ms(20000)));
  if (n < 0) {
    WaitChild(child);
    GTEST_SKIP() << "cannot setuid(65534)";
  }
  EXPECT_GT(n, 256) << "the flood did not get going";
  const auto cpu_before = CpuTimeOf(broker_->pid());
  auto t = TimeFormation(socket(), UniqueGroup("flooded"), Ms(10000));
  const auto cpu = CpuTimeOf(broker_->pid()) - cpu_before;
  // The join was queued behind the whole flood in the accept backlog, so the
  // broker has seen every connection of it by now, and the flood still holds
  // them all.
  const int fds = CountOpenFds(broker_->pid());
  char c = 'x';
  done.Write(&c, 1);
  EXPECT_EQ(WaitChild(child), 0);
  // Starving shows as a join that is not served while the flood lasts, or a
  // broker that holds the other uid's connections until its descriptors run
  // out (3012 of them with the cap on other uids taken out), not as wall
  // time: the join first waits for the broker to refuse 3000 connections,
  // 0.1 s of an idle machine and over 1 s of a loaded one. So: served, the
  // broker holds a few descriptors (17: its own, at most 4 of the other
  // uid's), and refusing the flood cost it little CPU (~50 ms at any load).
  ASSERT_OK(t.status());
  EXPECT_LT(fds, 64) << "the broker holds the other uid's connections";
  EXPECT_LT(cpu, Ms(1000)) << "refusing another uid's connections cost the broker " << cpu.count()
                           << " us of CPU";
  EXPECT_TRUE(BrokerAlive());
}

// One 8 KiB burst of pipelined STATUS (682 requests) from a peer that does
// not read its replies, with 300 live groups in /dev/shm.
TEST_F(FloodTest, StatusFloodDoesNotStallJoins) {
  auto busy = LiveForeignSegments(300, dir_.path() + "/other.sock");
  ASSERT_EQ(busy.size(), 300u);
  StartBroker();
  ASSERT_OK(TimeFormation(socket(), UniqueGroup("warm"), Ms(5000)).status());
  int flooder = ConnectRaw(socket());
  ASSERT_GE(flooder, 0);
  auto burst = StatusBurst(8192);
  ASSERT_EQ(::send(flooder, burst.data(), burst.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(burst.size()));
  const auto cpu_before = CpuTimeOf(broker_->pid());
  auto t = TimeFormation(socket(), UniqueGroup("under-flood"), Ms(10000));
  const auto cpu = CpuTimeOf(broker_->pid()) - cpu_before;
  ASSERT_OK(t.status());
  // A join queued behind the burst waits for the broker to answer 682 STATUS
  // requests at 300 groups (15-20 s before the fix); one that gets its turn
  // waits for a few. The broker's CPU time tells them apart at any load
  // (~25 ms in turn; 4.1 s with the turns and the status cache taken out);
  // wall time does not: the same join took 30 ms of an idle machine and
  // 500 ms at a load of 10 per core.
  EXPECT_LT(cpu, Ms(500)) << "a join waited behind a STATUS burst: the broker spent " << cpu.count()
                          << " us of CPU before it was served";
  // The flooder still gets its answers, at the pace it reads them: its first
  // reply, however long a loaded broker takes to send it.
  std::vector<uint8_t> got;
  StatusOr<std::optional<ipc::Message>> first = std::optional<ipc::Message>();
  WaitFor(
      [&] {
        auto more = ReadUntilEof(flooder, Ms(20));
        got.insert(got.end(), more.begin(), more.end());
        size_t consumed = 0;
        first = ipc::TryDecodeFrame(got.data(), got.size(), &consumed);
        return !first.ok() || first->has_value();
      },
      Ms(5000));
  ASSERT_TRUE(first.ok() && first->has_value()) << got.size() << " bytes of replies";
  EXPECT_TRUE(std::holds_alternative<ipc::StatusReply>(**first));
  ::close(flooder);
  EXPECT_TRUE(BrokerAlive());
}

}  // namespace
}  // namespace qr::testing
