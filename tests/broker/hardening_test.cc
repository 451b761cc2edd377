// The broker and qrctl survive hostile text and hostile neighbours: names and
// reasons that are not UTF-8 or cut mid-character, echoed NUL bytes, terminal
// escapes, the longest group names at many generations, segments gc cannot
// parse or open, a recreated socket directory, a socket path without '/', and
// the memory the broker keeps per name and in its log.
//
// Runs in a private /dev/shm (EnterPrivateShm, root): the objects planted
// here would upset every other broker of this uid.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/broker_client.h"
#include "ipc/gc.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "ipc/segment.h"
#include "ipc/wire.h"
#include "nlohmann/json.hpp"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"
#include "tools/qrctl_lib.h"

namespace qr::testing {
namespace {

using ipc::GroupMembership;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// Sets a file's modification time to an hour ago (gc spares young orphans).
void MakeOld(const std::string& shm_name) {
  std::string path = "/dev/shm" + shm_name;
  timeval tv[2];
  ::gettimeofday(&tv[0], nullptr);
  tv[0].tv_sec -= 3600;
  tv[1] = tv[0];
  ASSERT_EQ(::utimes(path.c_str(), tv), 0) << path << ": " << std::strerror(errno);
}

void CreateFile(const std::string& shm_name, size_t bytes = 0) {
  std::string path = "/dev/shm" + shm_name;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  if (bytes > 0) {
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  }
  ::close(fd);
}

bool Exists(const std::string& shm_name) {
  struct stat st {};
  return ::lstat(("/dev/shm" + shm_name).c_str(), &st) == 0;
}

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = EnterPrivateShm();
    if (!why.empty()) GTEST_SKIP() << "private /dev/shm: " << why;
  }
  void StartBroker(std::vector<std::string> args = {}) {
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), dir_.path() + "/broker.sock",
                                              std::move(args));
    ASSERT_OK(broker_->Start());
  }
  std::string socket() const { return dir_.path() + "/broker.sock"; }
  bool BrokerAlive() { return broker_ && ::kill(broker_->pid(), 0) == 0; }
  StatusOr<json> StatusDoc() {
    auto text = ipc::QueryStatus(socket(), std::chrono::seconds(3));
    if (!text.ok()) return text.status();
    json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return InternalError("status is not JSON: " + *text);
    return doc;
  }
  // Forms a two-rank host group and returns both members.
  void Form(const std::string& group, std::unique_ptr<GroupMembership>* m0,
            std::unique_ptr<GroupMembership>* m1) {
    ASSERT_OK_AND_ASSIGN(*m0, GroupMembership::Join(HostJoin(socket(), group, 0, 2)));
    ASSERT_OK_AND_ASSIGN(*m1, GroupMembership::Join(HostJoin(socket(), group, 1, 2)));
    ASSERT_OK(PublishBoth(**m0, **m1));
  }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

// --- 1. invalid UTF-8 -------------------------------------------------------

TEST_F(HardeningTest, ShmNameThatIsNotUtf8KillsNeitherBrokerNorQrctl) {
  StartBroker();
  const std::string bad = ipc::UserPrefix(::getuid()) + "\xff\xff-x";
  CreateFile(bad);
  MakeOld(bad);
  ASSERT_OK_AND_ASSIGN(json doc, StatusDoc());
  EXPECT_TRUE(BrokerAlive());
  std::string dumped = doc["stale_objects"].dump();
  EXPECT_THAT(dumped, HasSubstr("\\\\xff\\\\xff-x")) << dumped;
  // qrctl's text view of the live broker, then its own no-broker document.
  CtlRun text = Qrctl({"--socket", socket(), "status"});
  EXPECT_EQ(text.code, tools::kExitDegraded) << text.out << text.err;
  EXPECT_TRUE(IsValidUtf8(text.out));
  broker_->Signal(SIGTERM);
  CtlRun js = Qrctl({"--socket", socket(), "status", "--json"});
  EXPECT_EQ(js.code, tools::kExitNoBroker) << js.err;
  json nobroker = json::parse(js.out, nullptr, false);
  ASSERT_FALSE(nobroker.is_discarded()) << js.out;
  EXPECT_THAT(nobroker["stale_objects"].dump(), HasSubstr("xff"));
  CtlRun dry = Qrctl({"--socket", socket(), "gc", "--dry-run"});
  EXPECT_THAT(dry.out, HasSubstr("would remove /quickreduce-0-\\xff\\xff-x"));
  ::unlink(("/dev/shm" + bad).c_str());
}

TEST_F(HardeningTest, LongUtf8AbortReasonIsCutOnACharacterBoundary) {
  StartBroker();
  std::unique_ptr<GroupMembership> m0, m1;
  Form(UniqueGroup("utf8-abort"), &m0, &m1);
  // 150 two-byte characters: every limit on the way (128, 255, 256 bytes)
  // falls inside one.
  std::string reason;
  for (int i = 0; i < 150; ++i) reason += "\xC3\xBC";
  ASSERT_OK(m0->RaiseAbort(reason));
  Status failed = OkStatus();
  ASSERT_TRUE(WaitFor(
      [&] {
        failed = m1->Check();
        return !failed.ok();
      },
      std::chrono::seconds(5)));
  EXPECT_TRUE(IsValidUtf8(failed.message())) << failed.message();
  ASSERT_TRUE(WaitFor([&] { return StatusDoc().ok(); }, std::chrono::seconds(3)));
  ASSERT_OK_AND_ASSIGN(json doc, StatusDoc());
  ASSERT_EQ(doc["groups"].size(), 1u);
  std::string why = doc["groups"][0]["failure_reason"].get<std::string>();
  EXPECT_TRUE(IsValidUtf8(why));
  EXPECT_THAT(why, HasSubstr("aborted: \xC3\xBC\xC3\xBC"));
  EXPECT_TRUE(BrokerAlive());
}

// A reason that is not UTF-8 at all, straight on the wire.
TEST_F(HardeningTest, RawAbortReasonThatIsNotUtf8IsSanitised) {
  StartBroker();
  std::unique_ptr<GroupMembership> m0, m1;
  Form(UniqueGroup("raw-abort"), &m0, &m1);
  ASSERT_OK_AND_ASSIGN(auto conn, ipc::BrokerConnection::Connect(socket()));
  ipc::JoinRequest j;
  j.group = UniqueGroup("raw-abort");
  j.rank = 0;
  j.world_size = 2;
  j.device_id = "host";
  j.buffer_bytes = 1 << 20;
  j.timeout_ms = 10000;
  ASSERT_OK(conn->Send(j));
  ASSERT_OK_AND_ASSIGN(auto ok,
                       conn->Receive(std::chrono::steady_clock::now() + std::chrono::seconds(3)));
  ASSERT_TRUE(std::holds_alternative<ipc::JoinOk>(ok));
  ASSERT_OK(conn->Send(ipc::AbortRequest{std::string(250, '\xfe') + "\x1b[2J"}));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto d = StatusDoc();
        return d.ok() && d->dump().find("\\\\xfe") != std::string::npos;
      },
      std::chrono::seconds(3)));
  CtlRun text = Qrctl({"--socket", socket(), "status"});
  EXPECT_THAT(text.out, Not(HasSubstr("\x1b")));
  EXPECT_TRUE(IsValidUtf8(text.out));
  EXPECT_TRUE(BrokerAlive());
}

// --- 11. an echoed NUL, terminal escapes in qrctl ---------------------------

TEST_F(HardeningTest, ErrorReplyEchoingANulByteStillArrives) {
  StartBroker();
  int fd = ConnectRaw(socket());
  ASSERT_GE(fd, 0);
  // A JOIN whose group name holds a NUL: EncodeFrame refuses to build it.
  std::string group("a\0b", 3);
  std::vector<uint8_t> payload;
  auto put = [&](const void* p, size_t n) {
    payload.insert(payload.end(), static_cast<const uint8_t*>(p),
                   static_cast<const uint8_t*>(p) + n);
  };
  uint16_t glen = 3;
  put(&glen, 2);
  put(group.data(), 3);
  uint32_t rank = 0, ws = 2, timeout = 1000;
  put(&rank, 4);
  put(&ws, 4);
  uint16_t dlen = 4;
  put(&dlen, 2);
  put("host", 4);
  uint64_t bytes = 1 << 20;
  put(&bytes, 8);
  put(&timeout, 4);
  uint8_t shared_device = 0;  // protocol version 2
  put(&shared_device, 1);
  std::vector<uint8_t> frame(12);
  uint32_t magic = ipc::kWireMagic, len = static_cast<uint32_t>(payload.size());
  uint16_t version = ipc::kProtocolVersion, type = static_cast<uint16_t>(ipc::MessageType::kJoin);
  std::memcpy(frame.data(), &magic, 4);
  std::memcpy(frame.data() + 4, &version, 2);
  std::memcpy(frame.data() + 6, &type, 2);
  std::memcpy(frame.data() + 8, &len, 4);
  frame.insert(frame.end(), payload.begin(), payload.end());
  ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(frame.size()));
  std::vector<uint8_t> got = ReadUntilEof(fd, std::chrono::seconds(3));
  ::close(fd);
  size_t consumed = 0;
  auto m = ipc::TryDecodeFrame(got.data(), got.size(), &consumed);
  ASSERT_TRUE(m.ok() && m->has_value()) << "no reply frame, " << got.size() << " bytes";
  auto* e = std::get_if<ipc::ErrorReply>(&**m);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, static_cast<uint32_t>(StatusCode::kInvalidArgument));
  EXPECT_THAT(e->message, HasSubstr("a\\x00b"));
  EXPECT_TRUE(BrokerAlive());
}

TEST(QrctlTextTest, AbortReasonsCannotForgeLinesOrSendEscapes) {
  json doc = {
      {"broker", {{"pid", 1}, {"socket", "/s\x1b]0;title\x07"}}},
      {"groups",
       {{{"name", "g"},
         {"state", "FAILED"},
         {"failure_reason",
          "x\n\nstatus: healthy\n\x1b[2J\xc2\x9b"
          "1m"},
         {"members", {{{"rank", 0}, {"device", "d\rX"}}}}}}},
      {"problems",
       {{{"severity", "error"}, {"message", "m\x1b[31m"}, {"remedy", "r\nstatus: healthy"}}}},
  };
  std::string text = tools::RenderStatusText(doc);
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_THAT(text, Not(HasSubstr("\r")));
  EXPECT_THAT(text, Not(HasSubstr("\xc2\x9b")));
  size_t lines_claiming_health = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("status:", 0) == 0) ++lines_claiming_health;
  }
  EXPECT_EQ(lines_claiming_health, 1u) << text;
  EXPECT_THAT(text, HasSubstr("status: degraded"));
}

TEST(QrctlTextTest, FieldsOfTheWrongTypeDoNotThrow) {
  json doc = json::parse(R"({"broker": {"pid": "x", "uptime_s": "y", "version": 3},
      "groups": [{"name": 5, "generation": "z", "state": null, "failure_reason": 7,
                  "members": [{"rank": "r", "ops": 3, "bytes": [1], "last_progress_s": "n",
                               "device": 1}],
                  "missing_ranks": ["a", {}]}, 17],
      "problems": [{"message": 1}, "p"]})");
  std::string text = tools::RenderStatusText(doc);
  EXPECT_THAT(text, HasSubstr("status: degraded"));
  EXPECT_EQ(tools::RenderStatusText(json::array()).empty(), false);
}

// --- 6. every valid group name at many generations --------------------------

TEST_F(HardeningTest, LongestGroupNamesFormAtEveryGeneration) {
  StartBroker();
  std::string tag = UniqueGroup("n");
  for (size_t len : {47u, 48u, 55u, 63u}) {
    std::string group = tag + std::string(len - tag.size(), 'x');
    ASSERT_EQ(group.size(), len);
    for (int formation = 0; formation < (len == 63 ? 12 : 2); ++formation) {
      std::unique_ptr<GroupMembership> m0, m1;
      ipc::JoinParams p0 = HostJoin(socket(), group, 0, 2), p1 = HostJoin(socket(), group, 1, 2);
      p0.timeout = p1.timeout = std::chrono::milliseconds(3000);
      const std::string at =
          "length " + std::to_string(len) + " formation " + std::to_string(formation) + ": ";
      auto j0 = GroupMembership::Join(p0);
      ASSERT_TRUE(j0.ok()) << at << j0.status().ToString();
      auto j1 = GroupMembership::Join(p1);
      ASSERT_TRUE(j1.ok()) << at << j1.status().ToString();
      Status both = PublishBoth(**j0, **j1);
      ASSERT_TRUE(both.ok()) << at << both.ToString();
      ASSERT_OK((*j0)->Leave());
      ASSERT_OK((*j1)->Leave());
    }
  }
  EXPECT_TRUE(BrokerAlive());
}

// --- 7. gc spares what it cannot parse or open ------------------------------

// A live segment of another layout version: a member holds a lock on it.
TEST_F(HardeningTest, GcKeepsLiveSegmentsOfUnknownLayoutVersions) {
  const std::string group = UniqueGroup("v2");
  ipc::GroupSegment::CreateParams p = OtherBrokerSegment(group, dir_.path() + "/other.sock");
  ASSERT_OK_AND_ASSIGN(auto created, ipc::GroupSegment::Create(p));
  ASSERT_OK_AND_ASSIGN(auto member, ipc::GroupSegment::Open(p.name));
  ASSERT_OK(member->LockSlot(1));
  created->header()->layout_version = 2;  // a future quickreduce made it
  created.reset();                        // only the member's lock is left
  const std::string data = p.name + "-host1";
  CreateFile(data, 4096);
  MakeOld(p.name);
  MakeOld(data);
  // And a dead one of that version: reported, still not deleted.
  const std::string live_name = p.name;
  const std::string dead =
      OtherBrokerSegment(UniqueGroup("v2-dead"), dir_.path() + "/other.sock").name;
  {
    p.name = dead;
    ASSERT_OK_AND_ASSIGN(auto d, ipc::GroupSegment::Create(p));
    d->header()->layout_version = 2;
  }
  MakeOld(dead);

  ipc::SweepResult r = ipc::SweepStale(::getuid(), /*dry_run=*/false);
  EXPECT_TRUE(Exists(live_name));
  EXPECT_TRUE(Exists(data));
  EXPECT_TRUE(Exists(dead));
  EXPECT_THAT(r.removed, Not(::testing::Contains(data)));
  std::string unknown = ::testing::PrintToString(r.unknown);
  EXPECT_THAT(unknown, HasSubstr(live_name));
  EXPECT_THAT(unknown, HasSubstr(dead));
  CtlRun gc = Qrctl({"--socket", socket(), "gc"});
  EXPECT_THAT(gc.out, HasSubstr("layout version 2"));
  EXPECT_TRUE(Exists(data));
  EXPECT_TRUE(Exists(dead));
  ::unlink(("/dev/shm" + dead).c_str());
}

// A segment gc cannot open (out of descriptors; here, mode 0 for a user that
// is not root) may be live: it stays, and so does what may belong to it.
TEST_F(HardeningTest, GcLeavesObjectsItCannotOpenAlone) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to setuid";
  pid_t child = ForkChild([&] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 99;
    const std::string group = UniqueGroup("noopen");
    ipc::GroupSegment::CreateParams p = OtherBrokerSegment(group, dir_.path() + "/other.sock");
    auto live = ipc::GroupSegment::Create(p);
    if (!live.ok()) return 3;
    const std::string data = p.name + "-host0";
    int fd = ::open(("/dev/shm" + data).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return 4;
    ::close(fd);
    for (const std::string& n : {p.name, data}) {
      std::string path = "/dev/shm" + n;
      timeval tv[2];
      ::gettimeofday(&tv[0], nullptr);
      tv[0].tv_sec -= 3600;
      tv[1] = tv[0];
      if (::utimes(path.c_str(), tv) != 0) return 5;
    }
    if (::chmod(("/dev/shm" + p.name).c_str(), 0) != 0) return 6;
    ipc::SweepResult r = ipc::SweepStale(::getuid(), /*dry_run=*/false);
    for (const auto& e : r.errors) std::printf("gc: %s\n", e.c_str());
    for (const auto& e : r.removed) std::printf("gc removed: %s\n", e.c_str());
    bool kept = Exists(p.name) && Exists(data);
    // Reported either as an error or, not being mode 0600, as not ours.
    bool reported = !r.errors.empty() || !ipc::ListForeignObjects(::getuid()).empty();
    ::unlink(("/dev/shm" + p.name).c_str());
    ::unlink(("/dev/shm" + data).c_str());
    if (!kept) return 1;
    return reported ? 0 : 2;
  });
  int code = WaitChild(child);
  if (code == 99) GTEST_SKIP() << "cannot setuid(65534)";
  EXPECT_EQ(code, 0) << "1: removed, 2: no error reported, 3-6: setup";
}

// --- 9. one broker per socket ------------------------------------------------

TEST_F(HardeningTest, BrokerWhoseSocketDirectoryWasRecreatedStepsAside) {
  const std::string sub = dir_.path() + "/run";
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  const std::string sock = sub + "/broker.sock";
  BrokerProcess old_broker(BrokerBinary(), sock);
  ASSERT_OK(old_broker.Start());
  ASSERT_EQ(std::system(("rm -rf '" + sub + "'").c_str()), 0);
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  BrokerProcess new_broker(BrokerBinary(), sock);
  ASSERT_OK(new_broker.Start());
  struct stat before {};
  ASSERT_EQ(::stat(sock.c_str(), &before), 0);
  // The old broker sees its socket gone and leaves; were it told to stop
  // instead, it must not take the new broker's socket with it.
  bool gone = WaitFor(
      [&] {
        return ::kill(old_broker.pid(), 0) != 0 ||
               ::waitpid(old_broker.pid(), nullptr, WNOHANG) > 0;
      },
      std::chrono::seconds(3));
  EXPECT_TRUE(gone) << "two brokers serve " << sock;
  if (!gone) old_broker.Signal(SIGTERM);
  struct stat after {};
  ASSERT_EQ(::stat(sock.c_str(), &after), 0) << "the new broker's socket was removed";
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_OK(ipc::QueryStatus(sock, std::chrono::seconds(2)).status());
}

// --- 11. a socket path without '/' ------------------------------------------

TEST_F(HardeningTest, SocketPathWithoutASlashIsInTheWorkingDirectory) {
  const std::string bin = BrokerBinary();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir_.path().c_str()) != 0) ::_exit(126);
    ::execl(bin.c_str(), bin.c_str(), "--socket", "rel.sock", nullptr);
    ::_exit(127);
  }
  const std::string sock = dir_.path() + "/rel.sock";
  bool up = WaitFor([&] { return ipc::QueryStatus(sock, std::chrono::milliseconds(300)).ok(); },
                    std::chrono::seconds(5));
  struct stat st {};
  bool is_socket = ::lstat(sock.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  ::kill(pid, SIGTERM);
  WaitChild(pid);
  EXPECT_TRUE(up);
  EXPECT_TRUE(is_socket) << "rel.sock is not a socket (made a directory of it?)";
}

// --- 11. bounded memory: per-name generations and the log --------------------

TEST_F(HardeningTest, GenerationMapAndLogStayBounded) {
  const std::string log = dir_.path() + "/broker.log";
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(log_fd, 0);
  int saved = ::dup(2);
  ::dup2(log_fd, 2);  // the broker inherits it, as an autostarted one does
  StartBroker({"--max-log-bytes", "16384", "--remembered-names", "8"});
  ::dup2(saved, 2);
  ::close(saved);
  ::close(log_fd);
  for (int i = 0; i < 40; ++i) {
    std::unique_ptr<GroupMembership> m0, m1;
    Form(UniqueGroup("bounded"), &m0, &m1);
    ASSERT_OK(m0->Leave());
    ASSERT_OK(m1->Leave());
  }
  ASSERT_OK_AND_ASSIGN(json doc, StatusDoc());
  EXPECT_LE(doc["broker"]["remembered_names"].get<int>(), 8) << doc["broker"].dump();
  // Checked every tick: the log may overshoot by what one tick writes.
  struct stat rotated {};
  EXPECT_TRUE(
      WaitFor([&] { return ::stat((log + ".1").c_str(), &rotated) == 0; }, std::chrono::seconds(2)))
      << "the log was not rotated";
  struct stat st {};
  ASSERT_TRUE(WaitFor([&] { return ::stat(log.c_str(), &st) == 0 && st.st_size <= 16384; },
                      std::chrono::seconds(2)))
      << "the log grew past its cap: " << st.st_size << " bytes";
  EXPECT_LT(rotated.st_size, 4 * 16384);
  EXPECT_TRUE(BrokerAlive());
}

// One name formed and ended again and again (a job's group, every restart)
// keeps one entry: on main the queue of ended names grew by one per
// generation (40 B a cycle, 400 KiB in 10 000 cycles), since the map it
// prunes held one name and never reached its bound.
TEST_F(HardeningTest, NameReusedForeverKeepsOneEntry) {
  StartBroker({"--remembered-names", "8"});
  const std::string group = UniqueGroup("reused");
  for (uint64_t i = 1; i <= 40; ++i) {
    std::unique_ptr<GroupMembership> m0, m1;
    Form(group, &m0, &m1);
    ASSERT_EQ(m0->generation(), i);  // generations still count up
    ASSERT_OK(m0->Leave());
    ASSERT_OK(m1->Leave());
  }
  ASSERT_OK_AND_ASSIGN(json doc, StatusDoc());
  EXPECT_EQ(doc["broker"]["remembered_names"].get<int>(), 1) << doc["broker"].dump();
  EXPECT_EQ(doc["broker"]["ended_names"].get<int>(), 1) << doc["broker"].dump();
}

// --- a rank that cannot reserve its buffer ----------------------------------

// A host group of 4 at its largest one-shot ceiling (2 MiB a rank) needs 80
// MiB; this /dev/shm has 64. (At the built-in 1 MiB it needs 48.) The ranks whose
// buffers do not fit fail with UNAVAILABLE and fail the group, so the others
// fail at once (naming why) instead of waiting out the join timeout for ranks
// that "never joined" (on main: 20 s).
TEST_F(HardeningTest, RankThatCannotReserveItsBufferFailsItsPeersAtOnce) {
  StartBroker();
  ASSERT_EQ(::setenv("QR_ONE_SHOT_MAX_KB", "2048", 1), 0);
  const std::string group = UniqueGroup("nospace");
  std::vector<Status> results(4);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      JoinOptions o;
      o.broker_socket = socket();
      o.group = group;
      o.rank = r;
      o.world_size = 4;
      o.timeout_ms = 20000;
      auto c = Communicator::Join(o);
      results[r] = c.ok() ? OkStatus() : c.status();
    });
  }
  for (std::thread& t : ranks) t.join();
  ::unsetenv("QR_ONE_SHOT_MAX_KB");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5));
  int refused = 0;
  for (int r = 0; r < 4; ++r) {
    const Status& s = results[r];
    EXPECT_FALSE(s.ok()) << "rank " << r;
    EXPECT_THAT(s.message(), HasSubstr("not enough shared memory")) << "rank " << r << ": " << s;
    EXPECT_THAT(s.message(), Not(HasSubstr(": : "))) << s;
    if (s.code() == StatusCode::kUnavailable) {
      ++refused;
      EXPECT_THAT(s.message(), HasSubstr("need 21 MiB in /dev/shm")) << s;
    } else {
      EXPECT_EQ(s.code(), StatusCode::kPeerFailed) << "rank " << r << ": " << s;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_TRUE(BrokerAlive());
  EXPECT_TRUE(
      WaitFor([&] { return ShmObjectsWithPrefix(ipc::UserPrefix(::getuid()) + group).empty(); },
              std::chrono::seconds(3)));
}

}  // namespace
}  // namespace qr::testing
