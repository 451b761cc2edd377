// The pairwise peer-access rule over a matrix: every pair of distinct GPUs,
// both directions, by PCI bus id; shared GPUs need no path; a refusal names
// the pair; undecided pairs are reported, not refused.
#include "comm/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <utility>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A peer-access matrix by PCI bus id; absent pairs are undecided. Counts the
// questions.
struct Matrix {
  std::map<std::pair<std::string, std::string>, bool> can;
  int asked = 0;
  PeerAccessQuery Query() {
    return [this](const std::string& a, const std::string& b) -> StatusOr<gpu::PeerAccessAnswer> {
      ++asked;
      auto it = can.find({a, b});
      if (it == can.end()) return gpu::PeerAccessAnswer{std::nullopt, ""};
      return gpu::PeerAccessAnswer{it->second, "test matrix"};
    };
  }
  void Both(const std::string& a, const std::string& b, bool v) {
    can[{a, b}] = v;
    can[{b, a}] = v;
  }
};

const std::vector<std::string> kFour = {"0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0",
                                        "0000:5d:00.0"};

Matrix FullyConnected(const std::vector<std::string>& ids) {
  Matrix m;
  for (const auto& a : ids) {
    for (const auto& b : ids) {
      if (a != b) m.can[{a, b}] = true;
    }
  }
  return m;
}

TEST(TopologyTest, FullyConnectedGroupPassesAfterAskingEveryPairBothWays) {
  Matrix m = FullyConnected(kFour);
  std::vector<std::string> undecided;
  ASSERT_OK(CheckPeerAccess(kFour, m.Query(), &undecided));
  EXPECT_TRUE(undecided.empty());
  EXPECT_EQ(m.asked, 12);  // 6 pairs x 2 directions
}

TEST(TopologyTest, MissingPairNotInvolvingThisRankIsRefusedNamingThePair) {
  // Ranks 2 and 3 (say, on another PCIe switch) cannot reach each other;
  // rank 0, which asks, reaches everyone.
  Matrix m = FullyConnected(kFour);
  m.Both(kFour[2], kFour[3], false);
  Status s = CheckPeerAccess(kFour, m.Query());
  EXPECT_THAT(s, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(s.message(), HasSubstr("rank 2 (GPU 0000:4c:00.0) and rank 3 (GPU 0000:5d:00.0)"));
  EXPECT_THAT(s.message(), HasSubstr("test matrix"));
}

TEST(TopologyTest, OneWayAccessIsRefused) {
  Matrix m = FullyConnected(kFour);
  m.can[{kFour[3], kFour[1]}] = false;
  Status s = CheckPeerAccess(kFour, m.Query());
  EXPECT_THAT(s, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(s.message(), HasSubstr("GPU 0000:5d:00.0 cannot reach GPU 0000:3b:00.0"));
}

TEST(TopologyTest, RanksSharingAGpuNeedNoPathAndRepeatedPairsAreAskedOnce) {
  // Four ranks on two GPUs (QR_ALLOW_SHARED_DEVICE), as on one H200 under MPS
  // with two GPUs' worth of ranks.
  const std::vector<std::string> ids = {kFour[0], kFour[0], kFour[1], kFour[1]};
  Matrix m;
  m.Both(kFour[0], kFour[1], true);
  ASSERT_OK(CheckPeerAccess(ids, m.Query()));
  EXPECT_EQ(m.asked, 2);
  Matrix one;  // every rank on one GPU: nothing to ask
  ASSERT_OK(CheckPeerAccess({kFour[0], kFour[0], kFour[0], kFour[0]}, one.Query()));
  EXPECT_EQ(one.asked, 0);
}

TEST(TopologyTest, UndecidedPairsAreReportedNotRefused) {
  Matrix m = FullyConnected(kFour);
  m.can.erase({kFour[0], kFour[2]});
  std::vector<std::string> undecided;
  ASSERT_OK(CheckPeerAccess(kFour, m.Query(), &undecided));
  EXPECT_THAT(undecided, ElementsAre("rank 0 (GPU 0000:19:00.0) <-> rank 2 (GPU 0000:4c:00.0)"));
}

TEST(TopologyTest, QueryErrorsPassThrough) {
  PeerAccessQuery failing = [](const std::string&,
                               const std::string&) -> StatusOr<gpu::PeerAccessAnswer> {
    return InternalError("driver fell over");
  };
  EXPECT_THAT(CheckPeerAccess(kFour, failing), StatusIs(StatusCode::kInternal));
}

}  // namespace
}  // namespace qr
