// Ranks sharing a GPU (QR_ALLOW_SHARED_DEVICE, JoinParams::allow_shared_device)
// against the real qr-broker: admitted only when every GPU member of the
// group asked for it, refused with kAlreadyExists naming those that did not.
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/group_client.h"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using ipc::GroupMembership;
using ::testing::AllOf;
using ::testing::HasSubstr;

class SharedDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), dir_.path() + "/broker.sock");
    ASSERT_OK(broker_->Start());
  }

  ipc::JoinParams Gpu(const std::string& group, int rank, int ws, const std::string& device,
                      bool allow) {
    ipc::JoinParams p = HostJoin(broker_->socket(), group, rank, ws);
    p.device_id = device;
    p.allow_shared_device = allow;
    return p;
  }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

// Publishes every member at once (each waits for the others); the first error.
Status PublishAll(const std::vector<std::unique_ptr<GroupMembership>>& ms) {
  std::vector<Status> st(ms.size());
  std::vector<std::thread> ts;
  for (size_t r = 0; r < ms.size(); ++r) {
    ts.emplace_back([&, r] {
      st[r] =
          ms[r]->PublishAndWaitReady(ipc::BlobKind::kGpuIpcHandle, BlobFor(static_cast<int>(r)));
    });
  }
  for (auto& t : ts) t.join();
  for (const Status& s : st) {
    if (!s.ok()) return s;
  }
  return OkStatus();
}

TEST_F(SharedDeviceTest, SameGpuTwiceIsRefusedUnlessBothRanksAsk) {
  struct Case {
    bool first, second;
    const char* unwilling;
  };
  for (const Case& c :
       {Case{false, false, "ranks [0, 1] did not"}, Case{true, false, "ranks [1] did not"},
        Case{false, true, "ranks [0] did not"}}) {
    SCOPED_TRACE(std::string("flags ") + (c.first ? "1" : "0") + (c.second ? "1" : "0"));
    const std::string group = UniqueGroup("share");
    ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(Gpu(group, 0, 2, "gpu-a", c.first)));
    EXPECT_THAT(
        GroupMembership::Join(Gpu(group, 1, 2, "gpu-a", c.second)).status(),
        StatusIs(StatusCode::kAlreadyExists,
                 AllOf(HasSubstr("device gpu-a is already rank 0"), HasSubstr("share one GPU"),
                       HasSubstr("QR_ALLOW_SHARED_DEVICE=1"), HasSubstr(c.unwilling))));
    // The refusal left the group as it was: rank 1 on another GPU completes it.
    ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(Gpu(group, 1, 2, "gpu-b", c.second)));
    std::vector<std::unique_ptr<GroupMembership>> ms;
    ms.push_back(std::move(m0));
    ms.push_back(std::move(m1));
    EXPECT_OK(PublishAll(ms));
    for (auto& m : ms) EXPECT_OK(m->Leave());
  }
}

TEST_F(SharedDeviceTest, SameGpuFormsAGroupWhenEveryRankAsks) {
  const std::string group = UniqueGroup("shared");
  std::vector<std::unique_ptr<GroupMembership>> ms;
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK_AND_ASSIGN(auto m, GroupMembership::Join(Gpu(group, r, 2, "gpu-a", true)));
    ms.push_back(std::move(m));
  }
  ASSERT_OK(PublishAll(ms));
  const std::vector<ipc::MemberInfo> members = ms[0]->Members();
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].device_id, "gpu-a");
  EXPECT_EQ(members[1].device_id, "gpu-a");
  for (auto& m : ms) EXPECT_OK(m->Leave());
}

// At world size 4 consent is the group's: once two ranks share a GPU, every
// later rank must ask too, even on a GPU of its own; and a rank that did not
// ask keeps others from sharing any GPU.
TEST_F(SharedDeviceTest, EveryMemberOfTheGroupMustAsk) {
  const std::string group = UniqueGroup("share4");
  std::vector<std::unique_ptr<GroupMembership>> ms;
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK_AND_ASSIGN(auto m, GroupMembership::Join(Gpu(group, r, 4, "gpu-a", true)));
    ms.push_back(std::move(m));
  }
  EXPECT_THAT(GroupMembership::Join(Gpu(group, 2, 4, "gpu-b", false)).status(),
              StatusIs(StatusCode::kAlreadyExists, AllOf(HasSubstr("has ranks sharing a GPU"),
                                                         HasSubstr("ranks [2] did not"))));
  for (int r = 2; r < 4; ++r) {
    ASSERT_OK_AND_ASSIGN(auto m, GroupMembership::Join(Gpu(group, r, 4, "gpu-b", true)));
    ms.push_back(std::move(m));
  }
  EXPECT_OK(PublishAll(ms));
  for (auto& m : ms) EXPECT_OK(m->Leave());

  const std::string other = UniqueGroup("mixed4");
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(Gpu(other, 0, 4, "gpu-a", false)));
  ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(Gpu(other, 1, 4, "gpu-b", true)));
  EXPECT_THAT(
      GroupMembership::Join(Gpu(other, 2, 4, "gpu-b", true)).status(),
      StatusIs(StatusCode::kAlreadyExists,
               AllOf(HasSubstr("device gpu-b is already rank 1"), HasSubstr("ranks [0] did not"))));
  EXPECT_OK(m0->Leave());
  EXPECT_OK(m1->Leave());
}

// Asking changes nothing for ranks on GPUs of their own, and host members
// never count as sharing.
TEST_F(SharedDeviceTest, FlagWithoutSharingAndHostMembersAreUnaffected) {
  const std::string group = UniqueGroup("distinct");
  std::vector<std::unique_ptr<GroupMembership>> ms;
  ASSERT_OK_AND_ASSIGN(auto m0, GroupMembership::Join(Gpu(group, 0, 2, "gpu-a", true)));
  ASSERT_OK_AND_ASSIGN(auto m1, GroupMembership::Join(Gpu(group, 1, 2, "gpu-b", false)));
  ms.push_back(std::move(m0));
  ms.push_back(std::move(m1));
  EXPECT_OK(PublishAll(ms));
  for (auto& m : ms) EXPECT_OK(m->Leave());

  const std::string hosts = UniqueGroup("hosts");
  ASSERT_OK_AND_ASSIGN(auto h0, GroupMembership::Join(HostJoin(broker_->socket(), hosts, 0, 2)));
  ASSERT_OK_AND_ASSIGN(auto h1, GroupMembership::Join(HostJoin(broker_->socket(), hosts, 1, 2)));
  EXPECT_OK(PublishBoth(*h0, *h1));
  EXPECT_OK(h0->Leave());
  EXPECT_OK(h1->Leave());
}

}  // namespace
}  // namespace qr::testing
