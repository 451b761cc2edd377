// qrctl against a real broker: text and JSON for a live, a FAILED and a
// missing broker, --watch, gc, exit codes.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <random>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
using ::testing::HasSubstr;
using ::testing::Not;

class QrctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), dir_.path() + "/broker.sock");
    ASSERT_OK(broker_->Start());
    group_ = UniqueGroup("ctl");
    ASSERT_OK_AND_ASSIGN(m0_, GroupMembership::Join(HostJoin(socket(), group_, 0, 2)));
    ASSERT_OK_AND_ASSIGN(m1_, GroupMembership::Join(HostJoin(socket(), group_, 1, 2)));
    Status s1;
    std::thread t([&] { s1 = m1_->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(1)); });
    ASSERT_OK(m0_->PublishAndWaitReady(ipc::BlobKind::kHostSegment, BlobFor(0)));
    t.join();
    ASSERT_OK(s1);
    m0_->CountOp(0, 1 << 20);
    m0_->CountOp(3, 4 << 20);
    m0_->CountOp(3, 4 << 20);
  }
  std::string socket() const { return broker_->socket(); }
  nlohmann::json Group(const nlohmann::json& doc) {
    for (const auto& g : doc["groups"]) {
      if (g["name"] == group_) return g;
    }
    return nullptr;
  }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
  std::string group_;
  std::unique_ptr<GroupMembership> m0_, m1_;
};

TEST_F(QrctlTest, LiveGroupIsHealthyInTextAndJson) {
  CtlRun text = Qrctl({"--socket", socket(), "status"});
  std::printf("%s", text.out.c_str());
  CtlRun js = Qrctl({"--socket", socket(), "status", "--json"});
  std::printf("%s", js.out.c_str());
  nlohmann::json doc = nlohmann::json::parse(js.out);
  // Stale objects of crashed processes (tests running beside this one may
  // leave some) are the only problem a healthy group may see.
  const bool others_stale = !doc["stale_objects"].empty();
  EXPECT_EQ(text.code, others_stale ? tools::kExitDegraded : tools::kExitHealthy) << text.err;
  EXPECT_EQ(js.code, others_stale ? tools::kExitDegraded : tools::kExitHealthy);
  EXPECT_EQ(doc["problems"].size(), others_stale ? 1u : 0u) << js.out;
  EXPECT_THAT(text.out, HasSubstr("pid " + std::to_string(broker_->pid())));
  EXPECT_THAT(text.out, HasSubstr("group " + group_ + "  generation 1  world size 2  READY"));
  EXPECT_THAT(text.out, HasSubstr("FP=1 INT4=2"));
  EXPECT_THAT(text.out, HasSubstr("FP=1.0 MiB INT4=8.0 MiB"));
  EXPECT_THAT(text.out, HasSubstr(others_stale ? "run `qrctl gc`" : "status: healthy"));

  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["broker"]["pid"], broker_->pid());
  EXPECT_EQ(doc["broker"]["socket"], socket());
  EXPECT_EQ(doc["broker"]["protocol_version"], ipc::kProtocolVersion);
  nlohmann::json g = Group(doc);
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(g["state"], "READY");
  EXPECT_EQ(g["world_size"], 2);
  EXPECT_EQ(g["abort_word"], 0);
  ASSERT_EQ(g["members"].size(), 2u);
  const auto& r0 = g["members"][0];
  EXPECT_EQ(r0["rank"], 0);
  EXPECT_EQ(r0["pid"], ::getpid());
  EXPECT_EQ(r0["alive"], true);
  EXPECT_EQ(r0["device"], "host");
  EXPECT_EQ(r0["ops"]["INT4"], 2);
  EXPECT_EQ(r0["bytes"]["FP"], 1 << 20);
  EXPECT_TRUE(r0["last_progress_s"].is_number());
  EXPECT_TRUE(g["members"][1]["last_progress_s"].is_null());
}

TEST_F(QrctlTest, FailedGroupIsDegradedWithARemedy) {
  ASSERT_OK(m1_->RaiseAbort("bounded wait timed out"));
  ASSERT_TRUE(WaitFor(
      [&] {
        CtlRun r = Qrctl({"--socket", socket(), "status", "--json"});
        return Group(nlohmann::json::parse(r.out))["state"] == "FAILED";
      },
      std::chrono::seconds(2)));
  CtlRun text = Qrctl({"--socket", socket(), "status"});
  std::printf("%s", text.out.c_str());
  EXPECT_EQ(text.code, tools::kExitDegraded);
  EXPECT_THAT(text.out, HasSubstr("FAILED"));
  EXPECT_THAT(text.out, HasSubstr("failure: rank 1 (pid " + std::to_string(::getpid()) +
                                  ") aborted: bounded wait timed out"));
  EXPECT_THAT(text.out, HasSubstr("fix: survivors get QR_PEER_FAILED"));
  EXPECT_THAT(text.out, HasSubstr("status: degraded"));
  CtlRun js = Qrctl({"--socket", socket(), "status", "--json"});
  std::printf("%s", js.out.c_str());
  EXPECT_EQ(js.code, tools::kExitDegraded);
  nlohmann::json doc = nlohmann::json::parse(js.out);
  EXPECT_NE(Group(doc)["abort_word"], 0);
  ASSERT_FALSE(doc["problems"].empty());
  EXPECT_EQ(doc["problems"][0]["severity"], "error");
  EXPECT_EQ(doc["problems"][0]["group"], group_);
}

TEST_F(QrctlTest, StatusLargerThanOneFrameArrivesWhole) {
  // 40 forming groups of 8: a document well over the 64 KiB frame limit.
  std::vector<std::unique_ptr<GroupMembership>> members;
  std::vector<std::string> names;
  for (int g = 0; g < 40; ++g) {
    names.push_back(UniqueGroup("big"));
    for (int r = 0; r < 8; ++r) {
      ASSERT_OK_AND_ASSIGN(auto m, GroupMembership::Join(HostJoin(socket(), names.back(), r, 8)));
      members.push_back(std::move(m));
    }
  }
  CtlRun js = Qrctl({"--socket", socket(), "status", "--json"});
  nlohmann::json doc = nlohmann::json::parse(js.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << js.err;
  EXPECT_GT(doc.dump().size(), 64u * 1024u);
  EXPECT_EQ(doc["groups"].size(), 41u);  // ours and the fixture's
  for (const auto& m : members) EXPECT_OK(m->Leave());
}

TEST_F(QrctlTest, WatchRepeats) {
  CtlRun r =
      Qrctl({"--socket", socket(), "status", "--watch", "--count", "3", "--interval", "0.05"});
  EXPECT_NE(r.code, tools::kExitNoBroker);
  size_t n = 0;
  for (size_t pos = 0; (pos = r.out.find("\nstatus: ", pos)) != std::string::npos; ++pos) ++n;
  EXPECT_EQ(n, 3u);
}

TEST_F(QrctlTest, NoBrokerIsExitCodeTwo) {
  CtlRun r = Qrctl({"--socket", dir_.path() + "/none.sock", "status"});
  EXPECT_EQ(r.code, tools::kExitNoBroker);
  EXPECT_THAT(r.out, HasSubstr("no broker"));
  CtlRun js = Qrctl({"--socket", dir_.path() + "/none.sock", "status", "--json"});
  EXPECT_EQ(js.code, tools::kExitNoBroker);
  EXPECT_TRUE(nlohmann::json::parse(js.out)["broker"].is_null());
}

TEST_F(QrctlTest, BadArgumentsAreRefused) {
  EXPECT_NE(Qrctl({"status", "--bogus"}).code, 0);
  EXPECT_NE(Qrctl({}).code, 0);
}

TEST_F(QrctlTest, GcRemovesDeadOwnersObjectsAndStaleSockets) {
  // Objects of a made-up uid: brokers that other tests start concurrently
  // sweep only their own uid's objects, so nothing races this test.
  const uint32_t uid = 3000000000u + static_cast<uint32_t>(std::random_device()() % 100000000u);
  std::string dead_group = UniqueGroup("dead");
  std::string name = ipc::SegmentName(uid, dead_group, 1, 0xdead);
  std::string live = ipc::SegmentName(uid, dead_group + "-live", 1, 0x11fe);
  // A segment whose broker and members are dead, with a data object, and a
  // live one (its creator is still running) with its own.
  pid_t creator = ForkChild([&] {
    ipc::GroupSegment::CreateParams p;
    p.name = name;
    p.group = dead_group;
    p.world_size = 2;
    p.generation = 1;
    if (!ipc::GroupSegment::Create(p).ok()) return 1;
    return ::shm_open((name + "-data").c_str(), O_CREAT | O_RDWR, 0600) >= 0 ? 0 : 2;
  });
  ASSERT_EQ(WaitChild(creator), 0);
  ipc::GroupSegment::CreateParams lp;
  lp.name = live;
  lp.group = dead_group + "-live";
  lp.world_size = 2;
  lp.generation = 1;
  ASSERT_OK_AND_ASSIGN(auto live_seg, ipc::GroupSegment::Create(lp));
  int fd = ::shm_open((live + "-data").c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);

  const std::string uid_arg = std::to_string(uid);
  CtlRun dry = Qrctl({"--socket", socket(), "gc", "--uid", uid_arg, "--dry-run"});
  EXPECT_THAT(dry.out, HasSubstr("would remove " + name));
  EXPECT_EQ(ShmObjectsWithPrefix(name).size(), 2u);
  CtlRun gc = Qrctl({"--socket", socket(), "gc", "--uid", uid_arg});
  EXPECT_EQ(gc.code, 0) << gc.err;
  EXPECT_THAT(gc.out, HasSubstr("removed " + name + "\n"));
  EXPECT_THAT(gc.out, HasSubstr("removed " + name + "-data"));
  EXPECT_TRUE(ShmObjectsWithPrefix(name).empty());
  EXPECT_EQ(ShmObjectsWithPrefix(live).size(), 2u);
  EXPECT_THAT(gc.out, Not(HasSubstr(live)));
  live_seg.reset();
  ASSERT_OK(ipc::RemoveGroupObjects(live));
  EXPECT_TRUE(ShmObjectsWithPrefix(live).empty());

  // Our own uid: the live group and the live broker's socket are untouched.
  CtlRun mine = Qrctl({"--socket", socket(), "gc"});
  EXPECT_THAT(mine.out, Not(HasSubstr(group_)));
  EXPECT_THAT(mine.out, Not(HasSubstr("stale socket")));
  EXPECT_OK(m0_->Check());

  // A dead broker's socket goes too.
  m0_.reset();
  m1_.reset();
  broker_->Signal(SIGKILL);
  CtlRun after = Qrctl({"--socket", socket(), "gc"});
  EXPECT_THAT(after.out, HasSubstr("removed stale socket " + socket()));
  EXPECT_NE(::access(socket().c_str(), F_OK), 0);
  // Its lock file stays: a broker starting meanwhile may hold it open.
  EXPECT_EQ(::access(ipc::LockPathFor(socket()).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace qr::testing
