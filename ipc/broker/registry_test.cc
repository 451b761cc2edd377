// The registry's state machine driven directly, without sockets or a broker
// process: fake clients record what the registry sends them; real group
// segments in /dev/shm stand in for the members' side.
#include "ipc/broker/registry.h"

#include <unistd.h>

#include <chrono>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/group_types.h"
#include "ipc/names.h"
#include "ipc/segment.h"
#include "tests/util/status_matchers.h"

namespace qr::broker {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class FakeClient : public Client {
 public:
  explicit FakeClient(int32_t p) { pid = p; }
  void Send(const ipc::Message& m) override {
    if (!closed) sent.push_back(m);
  }
  void CloseAfterWrites() override { closed = true; }

  template <typename T>
  int Count() const {
    int n = 0;
    for (const auto& m : sent) n += std::holds_alternative<T>(m) ? 1 : 0;
    return n;
  }
  template <typename T>
  const T* Last() const {
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
      if (const T* t = std::get_if<T>(&*it)) return t;
    }
    return nullptr;
  }
  // The status of the last error reply (OK when none came).
  Status LastError() const {
    const ipc::ErrorReply* e = Last<ipc::ErrorReply>();
    return e == nullptr ? OkStatus() : ipc::StatusOf(*e);
  }

  std::vector<ipc::Message> sent;
  bool closed = false;
};

// Unique across concurrently running tests (PID namespaces give every test
// the same pid).
std::string Unique(const std::string& base) {
  static const std::string tag = std::to_string(std::random_device()() % 1000000000u);
  static int n = 0;
  return base + "-" + tag + "-" + std::to_string(++n);
}

ipc::JoinRequest HostJoin(const std::string& group, int rank, int world_size = 2) {
  ipc::JoinRequest r;
  r.group = group;
  r.rank = static_cast<uint32_t>(rank);
  r.world_size = static_cast<uint32_t>(world_size);
  r.device_id = std::string(ipc::kHostDeviceName);
  r.buffer_bytes = 1 << 20;
  r.timeout_ms = 10000;
  return r;
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : socket_("/tmp/" + Unique("registry-test") + ".sock") {}

  std::unique_ptr<Registry> NewRegistry() {
    return std::make_unique<Registry>(RegistryOptions{socket_, 4096});
  }
  std::shared_ptr<FakeClient> Joined(Registry& reg, const std::string& group, int rank,
                                     int world_size = 2) {
    auto c = std::make_shared<FakeClient>(1000 + rank);
    reg.Join(c, HostJoin(group, rank, world_size));
    EXPECT_EQ(c->Count<ipc::JoinOk>(), 1) << c->LastError();
    return c;
  }
  // What the member does: maps the segment, takes its slot lock and fills
  // its slot; the caller then tells the registry.
  std::unique_ptr<ipc::GroupSegment> MemberSide(const FakeClient& c, bool publish) {
    auto seg = ipc::GroupSegment::Open(c.Last<ipc::JoinOk>()->segment_name);
    EXPECT_TRUE(seg.ok()) << seg.status();
    if (!seg.ok()) return nullptr;
    EXPECT_OK((*seg)->LockSlot(c.rank));
    if (publish) ipc::StoreRelease(&(*seg)->slot(c.rank)->published, 1u);
    return std::move(*seg);
  }
  const Group& Only(const Registry& reg) {
    EXPECT_EQ(reg.groups().size(), 1u);
    return *reg.groups().begin()->second;
  }
  static bool Exists(const std::string& segment) { return ipc::GroupSegment::Open(segment).ok(); }

  std::string socket_;
};

TEST_F(RegistryTest, GroupIsReadyOnceEveryRankPublished) {
  auto reg = NewRegistry();
  const std::string group = Unique("ready");
  auto c0 = Joined(*reg, group, 0);
  auto c1 = Joined(*reg, group, 1);
  EXPECT_EQ(c0->group, group);
  EXPECT_EQ(c1->rank, 1);
  auto m0 = MemberSide(*c0, true);
  auto m1 = MemberSide(*c1, true);
  reg->Published(c0);
  EXPECT_EQ(c0->Count<ipc::ReadyNotice>(), 0);
  EXPECT_EQ(Only(*reg).state(), static_cast<uint32_t>(ipc::GroupState::kInit));
  reg->Published(c1);
  EXPECT_EQ(c0->Count<ipc::ReadyNotice>(), 1);
  EXPECT_EQ(c1->Count<ipc::ReadyNotice>(), 1);
  EXPECT_EQ(Only(*reg).state(), static_cast<uint32_t>(ipc::GroupState::kReady));
  EXPECT_EQ(c0->Last<ipc::ReadyNotice>()->generation, 1u);
}

TEST_F(RegistryTest, RefusesJoinsThatDoNotFit) {
  auto reg = NewRegistry();
  const std::string group = Unique("refuse");
  auto c0 = Joined(*reg, group, 0);

  auto taken = std::make_shared<FakeClient>(7);
  reg->Join(taken, HostJoin(group, 0));
  EXPECT_THAT(taken->LastError(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("taken by pid 1000")));
  EXPECT_TRUE(taken->closed);

  auto wrong_size = std::make_shared<FakeClient>(8);
  reg->Join(wrong_size, HostJoin(group, 1, 4));
  EXPECT_THAT(wrong_size->LastError(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("world size 4")));

  auto wrong_geometry = std::make_shared<FakeClient>(9);
  ipc::JoinRequest r = HostJoin(group, 1);
  r.buffer_bytes = 4096;
  reg->Join(wrong_geometry, r);
  EXPECT_THAT(wrong_geometry->LastError(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("geometry")));

  reg->Join(c0, HostJoin(Unique("second"), 0));
  EXPECT_THAT(c0->LastError(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("already holds rank 0")));
  EXPECT_EQ(reg->groups().size(), 1u);
}

TEST_F(RegistryTest, TwoRanksOnOneGpuOnlyWhenBothAgree) {
  auto reg = NewRegistry();
  const std::string group = Unique("gpu");
  ipc::JoinRequest r0 = HostJoin(group, 0), r1 = HostJoin(group, 1);
  r0.device_id = r1.device_id = "0000:1b:00.0";
  auto c0 = std::make_shared<FakeClient>(1), c1 = std::make_shared<FakeClient>(2);
  reg->Join(c0, r0);
  reg->Join(c1, r1);
  EXPECT_THAT(c1->LastError(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("ranks [0, 1] did not")));

  const std::string shared = Unique("gpu-shared");
  r0.group = r1.group = shared;
  r0.allow_shared_device = r1.allow_shared_device = true;
  auto s0 = std::make_shared<FakeClient>(3), s1 = std::make_shared<FakeClient>(4);
  reg->Join(s0, r0);
  reg->Join(s1, r1);
  EXPECT_EQ(s1->Count<ipc::JoinOk>(), 1) << s1->LastError();
}

TEST_F(RegistryTest, PublishedNeedsAJoinAndAWrittenSlot) {
  auto reg = NewRegistry();
  auto stranger = std::make_shared<FakeClient>(5);
  reg->Published(stranger);
  EXPECT_THAT(stranger->LastError(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("before JOIN")));

  auto c0 = Joined(*reg, Unique("unwritten"), 0);
  reg->Published(c0);
  EXPECT_THAT(c0->LastError(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("is not published")));
}

TEST_F(RegistryTest, DisconnectFailsTheGroupAndTellsTheSurvivors) {
  auto reg = NewRegistry();
  const std::string group = Unique("disconnect");
  auto c0 = Joined(*reg, group, 0);
  auto c1 = Joined(*reg, group, 1);
  const std::string segment = c0->Last<ipc::JoinOk>()->segment_name;
  reg->Disconnected(c1);
  EXPECT_TRUE(c1->group.empty());
  const Group& g = Only(*reg);
  EXPECT_EQ(g.state(), static_cast<uint32_t>(ipc::GroupState::kFailed));
  EXPECT_EQ(ipc::LoadAcquire(g.seg->abort_word()), ipc::kAbortMemberDied);
  ASSERT_NE(c0->Last<ipc::GroupFailedNotice>(), nullptr);
  EXPECT_THAT(c0->Last<ipc::GroupFailedNotice>()->reason,
              HasSubstr("rank 1 (pid 1001) disconnected without leaving"));

  // The name is taken until the last member has gone; then a new generation.
  auto late = std::make_shared<FakeClient>(6);
  reg->Join(late, HostJoin(group, 1));
  EXPECT_THAT(late->LastError(), StatusIs(StatusCode::kPeerFailed));
  reg->Leave(c0);
  EXPECT_EQ(c0->Count<ipc::LeaveOk>(), 1);
  EXPECT_TRUE(c0->closed);
  EXPECT_TRUE(reg->groups().empty());
  EXPECT_FALSE(Exists(segment));
  auto again = Joined(*reg, group, 0);
  EXPECT_EQ(again->Last<ipc::JoinOk>()->generation, 2u);
  reg->Leave(again);
}

TEST_F(RegistryTest, AbortRaisesTheAbortWordWithTheReason) {
  auto reg = NewRegistry();
  const std::string group = Unique("abort");
  auto c0 = Joined(*reg, group, 0);
  auto c1 = Joined(*reg, group, 1);
  reg->Abort(c0, ipc::AbortRequest{"gave up waiting"});
  const Group& g = Only(*reg);
  EXPECT_EQ(ipc::LoadAcquire(g.seg->abort_word()), ipc::kAbortRaised);
  EXPECT_THAT(ipc::ReadField(g.seg->header()->failure_reason, 256),
              HasSubstr("rank 0 (pid 1000) aborted: gave up waiting"));
  EXPECT_EQ(c1->Count<ipc::GroupFailedNotice>(), 1);
  // A second failure keeps the first reason.
  reg->Disconnected(c1);
  EXPECT_THAT(ipc::ReadField(g.seg->header()->failure_reason, 256), HasSubstr("aborted"));
  reg->Leave(c0);
  EXPECT_TRUE(reg->groups().empty());
}

TEST_F(RegistryTest, TickRefusesJoinsPastTheirTimeoutNamingTheMissingRanks) {
  auto reg = NewRegistry();
  const std::string group = Unique("timeout");
  auto c0 = Joined(*reg, group, 0, 4);
  auto c2 = Joined(*reg, group, 2, 4);
  const std::string segment = c0->Last<ipc::JoinOk>()->segment_name;
  reg->Tick(Registry::Clock::now());
  EXPECT_EQ(c0->LastError(), OkStatus());
  reg->Tick(Registry::Clock::now() + std::chrono::seconds(11));
  EXPECT_THAT(c0->LastError(),
              StatusIs(StatusCode::kTimeout,
                       HasSubstr("ranks [1, 3] never joined, ranks [0, 2] joined but did not "
                                 "publish")));
  EXPECT_TRUE(c0->closed && c2->closed);
  EXPECT_TRUE(c0->group.empty());
  EXPECT_TRUE(reg->groups().empty());
  EXPECT_FALSE(Exists(segment));
}

TEST_F(RegistryTest, AdoptsAReadyGroupAndWatchesItsMembersByTheirLocks) {
  const std::string group = Unique("adopt");
  auto first = NewRegistry();
  auto c0 = Joined(*first, group, 0);
  auto c1 = Joined(*first, group, 1);
  auto m0 = MemberSide(*c0, true);
  auto m1 = MemberSide(*c1, true);
  first->Published(c0);
  first->Published(c1);
  const std::string segment = c0->Last<ipc::JoinOk>()->segment_name;
  first.reset();  // the broker goes; the members stay

  auto reg = NewRegistry();
  reg->Adopt();
  const Group& g = Only(*reg);
  EXPECT_TRUE(g.adopted);
  EXPECT_EQ(g.name, group);
  EXPECT_EQ(g.state(), static_cast<uint32_t>(ipc::GroupState::kReady));
  ASSERT_TRUE(g.members[0].has_value() && g.members[1].has_value());
  EXPECT_EQ(g.members[0]->client, nullptr);
  EXPECT_TRUE(g.seg->BrokerHeld() == false);  // our own lock does not count

  auto newcomer = std::make_shared<FakeClient>(9);
  reg->Join(newcomer, HostJoin(group, 0));
  EXPECT_THAT(newcomer->LastError(), StatusIs(StatusCode::kAlreadyExists, HasSubstr("adopted")));

  // Rank 1 leaves cleanly; rank 0 dies (its lock goes without `left`).
  ipc::StoreRelease(&m1->slot(1)->left, 1u);
  m1.reset();
  reg->Tick(Registry::Clock::now());
  ASSERT_EQ(reg->groups().size(), 1u);
  EXPECT_FALSE(g.members[1].has_value());
  EXPECT_EQ(g.state(), static_cast<uint32_t>(ipc::GroupState::kReady));
  m0.reset();
  reg->Tick(Registry::Clock::now());
  EXPECT_TRUE(reg->groups().empty());
  EXPECT_FALSE(Exists(segment));
}

TEST_F(RegistryTest, AdoptionFailsAGroupThatWasForming) {
  const std::string group = Unique("forming");
  auto first = NewRegistry();
  auto c0 = Joined(*first, group, 0);
  auto m0 = MemberSide(*c0, false);
  first.reset();

  auto reg = NewRegistry();
  reg->Adopt();
  const Group& g = Only(*reg);
  EXPECT_EQ(g.state(), static_cast<uint32_t>(ipc::GroupState::kFailed));
  EXPECT_EQ(ipc::LoadAcquire(g.seg->abort_word()), ipc::kAbortMemberDied);
  EXPECT_THAT(ipc::ReadField(g.seg->header()->failure_reason, 256),
              HasSubstr("restarted while the group was forming"));
  m0.reset();
  reg->Tick(Registry::Clock::now());
  EXPECT_TRUE(reg->groups().empty());
}

TEST_F(RegistryTest, LeavesAnotherSocketsGroupsAlone) {
  const std::string group = Unique("other");
  auto first = NewRegistry();
  auto c0 = Joined(*first, group, 0);
  auto m0 = MemberSide(*c0, false);
  const std::string segment = c0->Last<ipc::JoinOk>()->segment_name;
  first.reset();

  Registry other(RegistryOptions{socket_ + ".other", 4096});
  other.Adopt();
  EXPECT_TRUE(other.groups().empty());
  // Its own broker takes it back (and fails it, as it was forming).
  auto reg = NewRegistry();
  reg->Adopt();
  EXPECT_EQ(reg->groups().size(), 1u);
  m0.reset();
  reg->Tick(Registry::Clock::now());
  EXPECT_FALSE(Exists(segment));
}

}  // namespace
}  // namespace qr::broker
