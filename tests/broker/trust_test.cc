// What another local user can do to us, and what a full /dev/shm does: a fake
// broker of another uid, a squatted or symlinked socket directory, planted and
// squatted shm names, a full /dev/shm (in a private mount namespace), and a
// peer dying while no broker runs. Second-uid cases run as root and act as
// uid 65534; each skips with a message where that is not possible.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "common/shm_object.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/broker_client.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "ipc/segment.h"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using ipc::GroupMembership;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr uid_t kOther = 65534;

bool BecomeOther() {
  return ::setresgid(kOther, kOther, kOther) == 0 && ::setresuid(kOther, kOther, kOther) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs qr-broker with `env` added, stderr to `log`; returns its exit code, or
// -1 if it was still running after `wait` (it is then killed).
int RunBroker(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const std::string& log, milliseconds wait) {
  pid_t pid = ForkChild([&] {
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    std::string bin = BrokerBinary();
    std::vector<char*> argv = {bin.data()};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    return 127;
  });
  const auto deadline = std::chrono::steady_clock::now() + wait;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  WaitChild(pid);
  return -1;
}

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), dir_.path() + "/broker.sock");
  }
  void RequireRoot() {
    if (::getuid() != 0) GTEST_SKIP() << "needs root to act as uid 65534";
  }
  std::string socket() const { return broker_->socket(); }
  // Forms a two-rank host group: rank 1 in a forked child (returned) that
  // runs `in_child` after its join and then stays READY until killed, rank 0
  // here (*m0). -1, the test failed and the child gone, if it does not form.
  pid_t FormWithPeerChild(const std::string& group, std::unique_ptr<GroupMembership>* m0,
                          const std::function<bool(GroupMembership&)>& in_child = nullptr) {
    Pipe pipe;
    pid_t peer = ForkChild([&] {
      auto m = GroupMembership::Join(HostJoin(socket(), group, 1, 2));
      if (!m.ok() || (in_child && !in_child(**m))) return 1;
      char c = (*m)->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(1)).ok() ? 'R' : 'F';
      pipe.Write(&c, 1);
      ::pause();
      return 0;
    });
    auto m = GroupMembership::Join(HostJoin(socket(), group, 0, 2));
    EXPECT_OK(m.status());
    if (m.ok()) {
      EXPECT_OK((*m)->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(0)));
      *m0 = std::move(m).value();
    }
    char c = 0;
    EXPECT_TRUE(pipe.Read(&c, 1, std::chrono::seconds(10)));
    EXPECT_EQ(c, 'R');
    if (HasFailure()) {
      ::kill(peer, SIGKILL);
      WaitChild(peer);
      return -1;
    }
    return peer;
  }
  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

// Item 2: a client talks only to a broker of its own uid.
TEST_F(TrustTest, FakeBrokerOfAnotherUidIsRefusedBeforeAnythingIsSent) {
  RequireRoot();
  ASSERT_EQ(::chown(dir_.path().c_str(), kOther, kOther), 0);
  const std::string path = dir_.path() + "/fake.sock";
  Pipe pipe;
  pid_t fake = ForkChild([&] {
    uint32_t got = 0xffffffff;
    if (!BecomeOther()) {
      pipe.Write(&got, sizeof(got));
      return 0;
    }
    int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(s, 4) != 0)
      return 1;
    ::chmod(path.c_str(), 0777);
    uint32_t ready = 0;
    pipe.Write(&ready, sizeof(ready));
    int c = ::accept(s, nullptr, nullptr);
    got = 0;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(c, buf, sizeof(buf))) > 0) got += static_cast<uint32_t>(n);
    pipe.Write(&got, sizeof(got));
    return 0;
  });
  uint32_t ready = 0;
  ASSERT_TRUE(pipe.Read(&ready, sizeof(ready), std::chrono::seconds(5)));
  if (ready == 0xffffffff) GTEST_SKIP() << "cannot become uid 65534 here";
  ipc::JoinParams p = HostJoin(path, UniqueGroup("fake"), 0, 2);
  p.timeout = milliseconds(300);
  p.autostart = false;
  auto m = GroupMembership::Join(p);
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kUnavailable, HasSubstr("runs as uid 65534")));
  m = Status(InternalError("closed"));  // drops the connection: the fake sees EOF
  uint32_t got = 1;
  ASSERT_TRUE(pipe.Read(&got, sizeof(got), std::chrono::seconds(5)));
  EXPECT_EQ(got, 0u) << "the client sent its JOIN to another uid's broker";
  EXPECT_EQ(WaitChild(fake), 0);
}

// Item 4: the default directory squatted by another user, or a symlink.
TEST_F(TrustTest, SquattedDefaultDirectoryIsRefusedWithAdvice) {
  RequireRoot();
  const std::string xdg = dir_.path() + "/xdg";
  ASSERT_EQ(::mkdir(xdg.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((xdg + "/quickreduce").c_str(), 0777), 0);
  ASSERT_EQ(::chown((xdg + "/quickreduce").c_str(), kOther, kOther), 0);
  ::setenv("XDG_RUNTIME_DIR", xdg.c_str(), 1);
  const std::string path = ipc::DefaultSocketPath();
  ipc::JoinParams p = HostJoin(path, UniqueGroup("squat"), 0, 2);
  p.autostart = true;
  p.timeout = milliseconds(300);
  auto m = GroupMembership::Join(p);
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kUnavailable, HasSubstr("belongs to uid 65534")));
  EXPECT_THAT(m.status().message(), HasSubstr("set XDG_RUNTIME_DIR"));
  const std::string log = dir_.path() + "/squat.log";
  EXPECT_NE(RunBroker({"--socket", path}, {"XDG_RUNTIME_DIR=" + xdg}, log, std::chrono::seconds(5)),
            0);
  EXPECT_THAT(ReadAll(log), HasSubstr("QR_BROKER_SOCKET"));
  ::unsetenv("XDG_RUNTIME_DIR");
}

TEST_F(TrustTest, SymlinkAtTheDefaultDirectoryIsNotFollowed) {
  const std::string xdg = dir_.path() + "/xdg";
  const std::string target = dir_.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(xdg.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(target.c_str(), (xdg + "/quickreduce").c_str()), 0);
  const std::string path = xdg + "/quickreduce/broker.sock";
  const std::string log = dir_.path() + "/link.log";
  EXPECT_NE(RunBroker({"--socket", path}, {"XDG_RUNTIME_DIR=" + xdg}, log, std::chrono::seconds(3)),
            0);
  EXPECT_THAT(ReadAll(log), HasSubstr("symbolic link"));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u) << "the link's target was chmod'ed";
  EXPECT_NE(::access((target + "/broker.sock").c_str(), F_OK), 0) << "the broker listened there";
}

TEST_F(TrustTest, AutostartLogLinkIsNotFollowed) {
  const std::string victim = dir_.path() + "/victim";
  { std::ofstream(victim) << ""; }
  ASSERT_EQ(::symlink(victim.c_str(), (socket() + ".log").c_str()), 0);
  ::setenv("QR_BROKER_BIN", BrokerBinary().c_str(), 1);
  ASSERT_OK(ipc::StartBroker(socket()));
  ASSERT_TRUE(WaitFor([&] { return ipc::QueryStatus(socket(), milliseconds(500)).ok(); },
                      std::chrono::seconds(10)));
  auto doc = ipc::QueryStatus(socket(), milliseconds(500));
  ASSERT_OK(doc.status());
  size_t at = doc->find("\"pid\":");
  ASSERT_NE(at, std::string::npos);
  pid_t pid = std::atoi(doc->c_str() + at + 6);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGTERM);
  WaitFor([&] { return ::kill(pid, 0) != 0; }, std::chrono::seconds(5));
  EXPECT_EQ(ReadAll(victim), "") << "the broker's log went through the link";
}

// Item 11: a socket path without '/' must not make the broker mkdir it.
TEST_F(TrustTest, SlashlessSocketPathIsASocketInTheWorkingDirectory) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(dir_.path().c_str()), 0);
  BrokerProcess b(BrokerBinary(), "rel.sock");
  ASSERT_OK(b.Start());
  struct stat st {};
  EXPECT_EQ(::lstat("rel.sock", &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode)) << "rel.sock is not a socket";
  b.Signal(SIGTERM);
  ASSERT_EQ(::chdir(cwd), 0);
}

// Item 5: a planted segment (another owner, mode 0666) is never adopted.
TEST_F(TrustTest, PlantedSegmentIsIgnoredAndReported) {
  RequireRoot();
  const std::string group = UniqueGroup("plant");
  const std::string name = ipc::SegmentName(::getuid(), group, 1, 0x1234);
  pid_t creator = ForkChild([&] {
    ipc::GroupSegment::CreateParams p;
    p.name = name;
    p.group = group;
    p.world_size = 2;
    p.generation = 1;
    p.socket_path = socket();
    return ipc::GroupSegment::Create(p).ok() ? 0 : 1;
  });
  ASSERT_EQ(WaitChild(creator), 0);
  const std::string file = "/dev/shm" + name;
  ASSERT_EQ(::chown(file.c_str(), kOther, kOther), 0);
  ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
  ASSERT_OK(broker_->Start());
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(HostJoin(socket(), group, 0, 2)));
  ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(HostJoin(socket(), group, 1, 2)));
  EXPECT_OK(PublishBoth(*m0, *m1));
  EXPECT_NE(m0->segment_name(), name);
  auto doc = ipc::QueryStatus(socket(), milliseconds(1000));
  ASSERT_OK(doc.status());
  EXPECT_THAT(*doc, HasSubstr(name));
  EXPECT_THAT(*doc, HasSubstr("not ours"));
  EXPECT_EQ(::access(file.c_str(), F_OK), 0) << "a foreign file was removed";
  ::unlink(file.c_str());
}

// Item 5: 1000 names squatted by another user do not block a group.
TEST_F(TrustTest, SquattedNamesDoNotBlockAGroup) {
  RequireRoot();
  const std::string group = UniqueGroup("sq");
  const std::string prefix = ipc::UserPrefix(::getuid()) + group + "-";
  pid_t squatter = ForkChild([&] {
    if (!BecomeOther()) return 3;
    for (int gen = 1; gen <= 1000; ++gen) {
      int fd = ::shm_open((prefix + std::to_string(gen)).c_str(), O_CREAT | O_RDWR, 0644);
      if (fd < 0) return 1;
      ::close(fd);
    }
    return 0;
  });
  int rc = WaitChild(squatter);
  if (rc == 3) GTEST_SKIP() << "cannot become uid 65534 here";
  ASSERT_EQ(rc, 0);
  ASSERT_OK(broker_->Start());
  auto m0 = GroupMembership::Join(HostJoin(socket(), group, 0, 2));
  auto m1 = GroupMembership::Join(HostJoin(socket(), group, 1, 2));
  EXPECT_OK(m0.status());
  EXPECT_OK(m1.status());
  if (m0.ok() && m1.ok()) EXPECT_OK(PublishBoth(**m0, **m1));
  for (int gen = 1; gen <= 1000; ++gen) ::shm_unlink((prefix + std::to_string(gen)).c_str());
}

// Item 3: a full /dev/shm fails joins and host buffers cleanly; the broker
// survives. In a private mount namespace with a 1 MiB tmpfs on /dev/shm.
TEST_F(TrustTest, FullDevShmFailsCleanlyAndTheBrokerSurvives) {
  Pipe pipe;
  pid_t child = ForkChild([&] {
    char msg[512] = {};
    auto report = [&](int code, const std::string& text) {
      std::snprintf(msg, sizeof(msg), "%s", text.c_str());
      pipe.Write(msg, sizeof(msg));
      return code;
    };
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m,mode=1777") != 0) {
      return report(77, std::string("unshare/mount: ") + std::strerror(errno));
    }
    // A host buffer larger than what is free.
    auto big = ShmMapping::Create("/quickreduce-trust-big", 8 << 20);
    if (big.ok() || big.status().code() != StatusCode::kUnavailable ||
        big.status().message().find(
            "not enough shared memory: need 8 MiB in /dev/shm, 1 MiB free") == std::string::npos) {
      return report(1, "8 MiB buffer: " + big.status().ToString());
    }
    BrokerProcess b(BrokerBinary(), socket());
    if (Status up = b.Start(); !up.ok()) return report(4, "broker: " + up.ToString());
    // Fill what is left, then ask for a group.
    int fill = ::shm_open("/quickreduce-trust-fill", O_CREAT | O_RDWR, 0600);
    off_t len = 64 << 10;
    while (::posix_fallocate(fill, 0, len) == 0) len += 4096;
    auto m = GroupMembership::Join(HostJoin(socket(), UniqueGroup("full"), 0, 2));
    if (m.ok() || m.status().code() != StatusCode::kUnavailable ||
        m.status().message().find("not enough shared memory") == std::string::npos) {
      return report(2, "join on a full /dev/shm: " + m.status().ToString());
    }
    if (!ipc::QueryStatus(socket(), milliseconds(1000)).ok()) return report(3, "the broker died");
    ::shm_unlink("/quickreduce-trust-fill");
    b.Signal(SIGTERM);
    return report(0, "");
  });
  char msg[512] = {};
  ASSERT_TRUE(pipe.Read(msg, sizeof(msg), std::chrono::seconds(30)));
  int rc = WaitChild(child);
  if (rc == 77) GTEST_SKIP() << "no private mount namespace here (" << msg << ")";
  EXPECT_EQ(rc, 0) << msg;
}

// Item 10: with the broker gone, a dead peer fails the survivor within 1 s.
TEST_F(TrustTest, DeadPeerIsSeenWithoutABroker) {
  ASSERT_OK(broker_->Start());
  const std::string group = UniqueGroup("nobroker");
  std::unique_ptr<GroupMembership> m0;
  pid_t peer = FormWithPeerChild(group, &m0);
  ASSERT_GT(peer, 0);
  broker_->Signal(SIGKILL);
  EXPECT_OK(m0->Check());
  const auto killed = std::chrono::steady_clock::now();
  ::kill(peer, SIGKILL);
  WaitChild(peer);
  EXPECT_TRUE(WaitFor([&] { return !m0->Check().ok(); }, std::chrono::seconds(1)))
      << "no PEER_FAILED within 1 s of the kill";
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_THAT(m0->Check(), StatusIs(StatusCode::kPeerFailed, HasSubstr("rank 1")));
  std::printf("survivor saw PEER_FAILED %.1f ms after the kill\n", ms);
}

// With no broker, no sweep follows a group's end: the last member to leave
// removes the segment and the dead members' data objects (on main they stayed
// until the next broker started: 20 MiB per dead host rank).
TEST_F(TrustTest, LastMemberOutRemovesTheGroupWithoutABroker) {
  ASSERT_OK(broker_->Start());
  const std::string group = UniqueGroup("nobroker-gc");
  std::unique_ptr<GroupMembership> m0;
  pid_t peer = FormWithPeerChild(group, &m0, [](GroupMembership& m) {
    // A data object of this rank, as the host backend makes one.
    const int fd =
        ::shm_open((m.segment_name() + "-host1").c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  });
  ASSERT_GT(peer, 0);
  const std::string prefix = ipc::UserPrefix(::getuid()) + group + "-";
  EXPECT_EQ(ShmObjectsWithPrefix(prefix).size(), 2u);  // the segment, rank 1's data
  broker_->Signal(SIGKILL);
  ::kill(peer, SIGKILL);
  WaitChild(peer);
  ASSERT_TRUE(WaitFor([&] { return !m0->Check().ok(); }, std::chrono::seconds(1)));
  m0->Leave().IgnoreError();  // no broker to tell
  EXPECT_THAT(ShmObjectsWithPrefix(prefix), ::testing::IsEmpty());
}

// A member that leaves while a peer lives leaves the group alone.
TEST_F(TrustTest, MemberLeavingWithoutABrokerKeepsALivePeersGroup) {
  ASSERT_OK(broker_->Start());
  const std::string group = UniqueGroup("nobroker-keep");
  std::unique_ptr<GroupMembership> m0;
  pid_t peer = FormWithPeerChild(group, &m0);
  ASSERT_GT(peer, 0);
  broker_->Signal(SIGKILL);
  m0->Leave().IgnoreError();
  const std::string prefix = ipc::UserPrefix(::getuid()) + group + "-";
  EXPECT_EQ(ShmObjectsWithPrefix(prefix).size(), 1u);  // rank 1 still maps it
  ::kill(peer, SIGKILL);
  WaitChild(peer);
  for (const std::string& name : ShmObjectsWithPrefix(prefix)) ::shm_unlink(("/" + name).c_str());
}

}  // namespace
}  // namespace qr::testing
