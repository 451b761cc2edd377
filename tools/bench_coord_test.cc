#include "tools/bench_coord.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "tests/util/status_matchers.h"

namespace qr::bench {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CoordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/qr-coord-test.XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    dir_ = t;
    path_ = dir_ + "/coord.sock";
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  // Serves until stop is set.
  std::thread Serve(CoordServer& s, std::atomic<bool>& stop) {
    return std::thread([&] {
      while (!stop) ASSERT_OK(s.Poll(20));
    });
  }
  std::string dir_, path_;
};

TEST_F(CoordTest, AllGatherBarrierBroadcastAndAllOkAcrossThreeRanks) {
  ASSERT_OK_AND_ASSIGN(CoordServer server, CoordServer::Listen(path_, 3));
  std::atomic<bool> stop{false};
  std::thread serving = Serve(server, stop);
  std::vector<std::vector<std::string>> gathered(3);
  std::vector<std::string> broadcast(3);
  std::vector<Status> all_ok(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      ASSERT_OK_AND_ASSIGN(CoordClient c, CoordClient::Connect(path_, r));
      ASSERT_OK_AND_ASSIGN(gathered[r], c.AllGather("v" + std::to_string(r * 10)));
      ASSERT_OK(c.Barrier());
      ASSERT_OK_AND_ASSIGN(broadcast[r], c.Broadcast(r == 0 ? "rank0" : "other"));
      all_ok[r] = c.AllOk(r == 2 ? InternalError("no GPU\nhere") : OkStatus());
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(gathered[r], ElementsAre("v0", "v10", "v20"));
    EXPECT_EQ(broadcast[r], "rank0");
    // Every rank gets the same verdict, naming the rank that failed.
    EXPECT_THAT(all_ok[r],
                StatusIs(StatusCode::kInternal, HasSubstr("rank 2: INTERNAL: no GPU here")));
  }
  stop = true;
  serving.join();
  EXPECT_EQ(server.rounds(), 4);
  // Every client closed at the end of its thread.
  for (int i = 0; i < 100 && !server.done(); ++i) ASSERT_OK(server.Poll(10));
  EXPECT_TRUE(server.done());
  EXPECT_FALSE(server.aborted());
}

TEST_F(CoordTest, ARankThatLeavesFailsTheWaitingOnes) {
  ASSERT_OK_AND_ASSIGN(CoordServer server, CoordServer::Listen(path_, 2));
  std::atomic<bool> stop{false};
  std::thread serving = Serve(server, stop);
  Status waited;
  auto gone = std::make_unique<StatusOr<CoordClient>>(CoordClient::Connect(path_, 1));
  ASSERT_TRUE(gone->ok());
  std::thread waiter([&] {
    ASSERT_OK_AND_ASSIGN(CoordClient c, CoordClient::Connect(path_, 0));
    waited = c.AllGather("x").status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  gone.reset();  // rank 1 closes before it ever sends
  waiter.join();
  EXPECT_THAT(waited, StatusIs(StatusCode::kUnavailable, HasSubstr("closed the connection")));
  EXPECT_TRUE(server.aborted());
  EXPECT_THAT(server.abort_reason(), HasSubstr("rank 1 left while rank 0 waited"));
  stop = true;
  serving.join();
}

TEST_F(CoordTest, APayloadWithANewlineOrTheSeparatorIsRefused) {
  EXPECT_OK(CheckCoordPayload("12.5 ok"));
  EXPECT_THAT(CheckCoordPayload("a\nb"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(CheckCoordPayload(std::string("a") + kCoordSeparator),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(CoordTest, ConnectGivesUpWhenNobodyListens) {
  EXPECT_THAT(CoordClient::Connect(path_, 0, std::chrono::milliseconds(100)).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr(path_)));
}

TEST(HexTest, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(HexEncode("\x01\xab"), "01ab");
  ASSERT_OK_AND_ASSIGN(std::string back, HexDecode(HexEncode(all)));
  EXPECT_EQ(back, all);
  EXPECT_THAT(HexDecode("abc").status(), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(HexDecode("zz").status(), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace qr::bench
