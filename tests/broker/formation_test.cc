// Group formation with a real qr-broker, real sockets and real shm: world
// sizes 2/4/8 across processes, every refusal, join timeouts.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/broker_client.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using ipc::GroupMembership;
using ::testing::HasSubstr;

class FormationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), dir_.path() + "/broker.sock");
    ASSERT_OK(broker_->Start());
  }
  std::string socket() const { return broker_->socket(); }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

// Each child joins, publishes its blob, checks every peer's blob and pid, and
// leaves. Exit code 0 = all good.
int Member(const std::string& socket, const std::string& group, int rank, int ws) {
  auto m = GroupMembership::Join(HostJoin(socket, group, rank, ws));
  if (!m.ok()) {
    std::fprintf(stderr, "rank %d join: %s\n", rank, m.status().ToString().c_str());
    return 10;
  }
  Status s = (*m)->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(rank));
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d ready: %s\n", rank, s.ToString().c_str());
    return 11;
  }
  auto members = (*m)->Members();
  if (static_cast<int>(members.size()) != ws) return 12;
  for (int r = 0; r < ws; ++r) {
    if (members[r].rank != r || members[r].blob != BlobFor(r) || members[r].pid <= 0 ||
        members[r].kind != ipc::BlobKind::kHostSegment || members[r].device_id != "host") {
      return 13;
    }
  }
  if (members[rank].pid != ::getpid()) return 14;
  if (!(*m)->Check().ok() || *(*m)->abort_word() != 0) return 15;
  if (reinterpret_cast<uintptr_t>((*m)->abort_page()) % 4096 != 0) return 16;
  (*m)->CountOp(3, 4096);
  return (*m)->Leave().ok() ? 0 : 17;
}

TEST_F(FormationTest, ProcessesFormGroupsOfTwoFourAndEight) {
  for (int ws : {2, 4, 8}) {
    std::string group = UniqueGroup("form");
    std::vector<pid_t> kids;
    for (int r = 0; r < ws; ++r) {
      kids.push_back(ForkChild([&, r] { return Member(socket(), group, r, ws); }));
    }
    for (int r = 0; r < ws; ++r) EXPECT_EQ(WaitChild(kids[r]), 0) << "ws " << ws << " rank " << r;
    // The group ended: its segment is gone.
    EXPECT_TRUE(
        WaitFor([&] { return ShmObjectsWithPrefix(ipc::UserPrefix(::getuid()) + group).empty(); },
                std::chrono::seconds(2)));
  }
}

// Joins rank r in this process on a thread (PublishAndWaitReady blocks).
struct ThreadMember {
  std::unique_ptr<GroupMembership> m;
  Status ready;
  std::thread t;
};

TEST_F(FormationTest, RefusesConflictingJoins) {
  std::string group = UniqueGroup("conflict");
  ipc::JoinParams p0 = HostJoin(socket(), group, 0, 4);
  p0.device_id = "gpu-a";
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(p0));

  ipc::JoinParams dup = p0;
  dup.device_id = "gpu-b";
  EXPECT_THAT(GroupMembership::Join(dup).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("rank 0")));

  ipc::JoinParams ws = HostJoin(socket(), group, 1, 2);
  EXPECT_THAT(GroupMembership::Join(ws).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("world size 2")));

  ipc::JoinParams geo = HostJoin(socket(), group, 1, 4);
  geo.buffer_bytes = 12345;
  EXPECT_THAT(GroupMembership::Join(geo).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("buffer geometry")));

  ipc::JoinParams same_gpu = HostJoin(socket(), group, 1, 4);
  same_gpu.device_id = "gpu-a";
  EXPECT_THAT(GroupMembership::Join(same_gpu).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("share one GPU")));

  // Host-backend members may share the "device".
  ipc::JoinParams h1 = HostJoin(socket(), group, 1, 4), h2 = HostJoin(socket(), group, 2, 4);
  ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(h1));
  ASSERT_OK_AND_ASSIGN(auto m2, GroupMembership::Join(h2));

  // The refusals did not disturb the group.
  EXPECT_OK(m0->Check());
  EXPECT_OK(m0->Leave());
  EXPECT_OK(m1->Leave());
  EXPECT_OK(m2->Leave());
}

TEST_F(FormationTest, RefusesBadParametersBeforeConnecting) {
  EXPECT_THAT(GroupMembership::Join(HostJoin(socket(), "bad/name", 0, 2)).status(),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(GroupMembership::Join(HostJoin(socket(), "g", 2, 2)).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside [0, 2)")));
  EXPECT_THAT(GroupMembership::Join(HostJoin(socket(), "g", 0, 3)).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("2, 4 or 8")));
}

TEST_F(FormationTest, JoinTimeoutNamesTheMissingRanks) {
  std::string group = UniqueGroup("timeout");
  ipc::JoinParams p0 = HostJoin(socket(), group, 0, 4);
  p0.timeout = std::chrono::milliseconds(300);
  ipc::JoinParams p2 = HostJoin(socket(), group, 2, 4);
  p2.timeout = std::chrono::milliseconds(5000);
  ASSERT_OK_AND_ASSIGN(auto m2, GroupMembership::Join(p2));  // joins, never publishes
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(p0));
  auto start = std::chrono::steady_clock::now();
  Status s = m0->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(0));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_THAT(s, StatusIs(StatusCode::kTimeout,
                          HasSubstr("ranks [1, 3] never joined, ranks [2] joined but did not "
                                    "publish")));
  EXPECT_LT(took, std::chrono::seconds(2));
  // The timed-out rank was freed: another process may take rank 0 now.
  ASSERT_OK_AND_ASSIGN(auto again, GroupMembership::Join(HostJoin(socket(), group, 0, 4)));
  EXPECT_OK(again->Leave());
  EXPECT_OK(m0->Leave());
  EXPECT_OK(m2->Leave());
}

TEST_F(FormationTest, ReadyGroupRefusesNewcomersAndCountsOps) {
  std::string group = UniqueGroup("ready");
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(HostJoin(socket(), group, 0, 2)));
  ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(HostJoin(socket(), group, 1, 2)));
  EXPECT_OK(PublishBoth(*m0, *m1));
  EXPECT_EQ(m0->generation(), m1->generation());
  auto parts = ipc::ParseSegmentName(m0->segment_name());
  ASSERT_TRUE(parts.has_value()) << m0->segment_name();
  EXPECT_EQ(parts->group, group);
  EXPECT_EQ(parts->generation, m0->generation());
  EXPECT_THAT(GroupMembership::Join(HostJoin(socket(), group, 1, 2)).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("READY")));
  EXPECT_THAT(m0->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(0)),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(m0->Leave());
  EXPECT_OK(m0->Leave());  // idempotent
  EXPECT_OK(m1->Leave());
}

TEST_F(FormationTest, NoBrokerWithoutAutostartIsUnavailable) {
  ipc::JoinParams p = HostJoin(dir_.path() + "/nobody.sock", UniqueGroup("nb"), 0, 2);
  EXPECT_THAT(GroupMembership::Join(p).status(), StatusIs(StatusCode::kUnavailable));
}

TEST_F(FormationTest, SocketAndLockArePrivate) {
  struct stat st {};
  ASSERT_EQ(::stat(socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(ipc::LockPathFor(socket()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(DefaultSocketTest, BrokerUsesXdgRuntimeDirWithAPrivateDirectory) {
  TempDir runtime;
  const std::string expected = runtime.path() + "/quickreduce/broker.sock";
  pid_t broker = ForkChild([&] {
    ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
    ::unsetenv("QR_BROKER_SOCKET");
    std::string bin = BrokerBinary();
    ::execl(bin.c_str(), bin.c_str(), nullptr);
    return 127;
  });
  EXPECT_TRUE(WaitFor([&] { return ipc::QueryStatus(expected, std::chrono::seconds(1)).ok(); },
                      std::chrono::seconds(10)));
  struct stat st {};
  ASSERT_EQ(::stat((runtime.path() + "/quickreduce").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Clients find it the same way.
  ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
  ipc::JoinParams p = HostJoin("", UniqueGroup("xdg"), 0, 2);
  ASSERT_OK_AND_ASSIGN(auto m, GroupMembership::Join(p));
  EXPECT_OK(m->Leave());
  ::unsetenv("XDG_RUNTIME_DIR");
  ::kill(broker, SIGTERM);
  EXPECT_EQ(WaitChild(broker), 0);
}

}  // namespace
}  // namespace qr::testing
