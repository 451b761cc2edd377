// The host backend driven through GroupControl alone: ranks are threads of
// this process, the group is an in-process fake (an abort word and a reason),
// the buffers are real POSIX shared memory. No broker, no segment, no fork.
// tests/e2e/host_backend_test.cc runs the same backend across processes
// through a broker.
#include "comm/host_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/backend.h"
#include "ipc/group_client.h"
#include "kernels/one_shot_reference.h"
#include "kernels/two_shot_reference.h"
#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The group as a backend sees it, shared by every rank-thread as the real
// segment is shared by every process: one abort word, the first reason.
class FakeGroup final : public GroupControl {
 public:
  FakeGroup() {
    static std::atomic<int> counter{0};
    name_ = "/qr-hbtest-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    page_ = static_cast<uint32_t*>(std::aligned_alloc(4096, 4096));
    std::memset(page_, 0, 4096);
  }
  ~FakeGroup() override { std::free(page_); }

  const std::string& segment_name() const override { return name_; }
  const volatile uint32_t* abort_word() const override { return page_; }
  void* abort_page() const override { return page_; }
  Status Check() override {
    if (__atomic_load_n(page_, __ATOMIC_ACQUIRE) == 0) return OkStatus();
    return PeerFailedError("group failed: " + reason());
  }
  Status RaiseAbort(std::string_view why) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reason_.empty()) reason_ = std::string(why);
      ++raised_;
    }
    __atomic_store_n(page_, 1u, __ATOMIC_RELEASE);
    return OkStatus();
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }
  int raised() const {
    std::lock_guard<std::mutex> lock(mu_);
    return raised_;
  }

 private:
  std::string name_;
  uint32_t* page_ = nullptr;
  mutable std::mutex mu_;
  std::string reason_;
  int raised_ = 0;
};

// One backend per rank, allocated and connected through `group`.
class Ranks {
 public:
  // `ceilings`: each rank's one-shot ceiling (bytes), none: the backend's default.
  Ranks(int world_size, FakeGroup& group, int64_t op_timeout_ms = 5000,
        const std::vector<uint64_t>& ceilings = {})
      : group_(group) {
    HostBackendOptions o;
    o.op_timeout_ms = op_timeout_ms;
    o.join_timeout_ms = 5000;
    for (int r = 0; r < world_size; ++r) {
      if (!ceilings.empty()) o.one_shot_ceiling_bytes = ceilings[static_cast<size_t>(r)];
      auto b = CreateHostBackend(r, world_size, o);
      EXPECT_TRUE(b.ok()) << b.status();
      backends_.push_back(std::move(b).value());
      EXPECT_TRUE(backends_.back()->Allocate(group).ok());
    }
  }

  std::vector<PeerBuffer> Members() const {
    std::vector<PeerBuffer> members;
    for (size_t r = 0; r < backends_.size(); ++r) {
      PeerBuffer p;
      p.rank = static_cast<int>(r);
      p.device_id = backends_[r]->device_id();
      p.kind = backends_[r]->blob_kind();
      p.blob = backends_[r]->blob();
      p.buffer_bytes = backends_[r]->buffer_bytes();
      members.push_back(p);
    }
    return members;
  }

  // Runs fn(rank) on one thread per rank and returns each rank's Status.
  std::vector<Status> OnEveryRank(const std::function<Status(int)>& fn) {
    std::vector<Status> out(backends_.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < backends_.size(); ++r) {
      threads.emplace_back([&, r] { out[r] = fn(static_cast<int>(r)); });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  std::vector<Status> Connect() {
    const std::vector<PeerBuffer> members = Members();
    return OnEveryRank([&](int r) { return backends_[r]->Connect(members, group_); });
  }

  Backend& operator[](int r) { return *backends_[r]; }
  int size() const { return static_cast<int>(backends_.size()); }

 private:
  FakeGroup& group_;
  std::vector<std::unique_ptr<Backend>> backends_;
};

std::vector<uint16_t> Input(int rank, int64_t n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  uint32_t x = 0x9e3779b9u * static_cast<uint32_t>(rank + 1);
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    // fp16 values of moderate magnitude: sign, exponent 10..17, mantissa.
    e = static_cast<uint16_t>((x >> 16 & 0x8000u) | (10u + (x >> 8) % 8u) << 10 | (x & 0x3ffu));
  }
  return v;
}

void ExpectAllReduceEqualsReference(int world_size, Algorithm algorithm, Codec codec, int64_t n,
                                    const std::vector<uint64_t>& ceilings = {}) {
  SCOPED_TRACE("ws " + std::to_string(world_size) + " " + AlgorithmName(algorithm) + " " +
               CodecName(codec) + " n " + std::to_string(n));
  FakeGroup group;
  Ranks ranks(world_size, group, 5000, ceilings);
  for (const Status& s : ranks.Connect()) ASSERT_OK(s);
  std::vector<std::vector<uint16_t>> in, out, want;
  for (int r = 0; r < world_size; ++r) {
    in.push_back(Input(r, n));
    out.emplace_back(n);
    want.emplace_back(n);
  }
  kernels::TwoShotParams p;
  p.world_size = world_size;
  p.codec = codec;
  p.num_elems = n;
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> wants;
  for (int r = 0; r < world_size; ++r) {
    ins.push_back(in[r].data());
    wants.push_back(want[r].data());
  }
  ASSERT_OK(algorithm == Algorithm::kOneShot
                ? kernels::ReferenceOneShotAllReduce(p, ins.data(), wants.data())
                : kernels::ReferenceAllReduce(p, ins.data(), wants.data()));
  // Twice: the second call runs on the colours and phases the first left.
  for (int call = 0; call < 2; ++call) {
    for (const Status& s : ranks.OnEveryRank([&](int r) {
           AllReduceCall c;
           c.in = in[r].data();
           c.out = out[r].data();
           c.count = static_cast<size_t>(n);
           c.codec = codec;
           c.algorithm = algorithm;
           return ranks[r].AllReduce(c);
         })) {
      ASSERT_OK(s);
    }
    for (int r = 0; r < world_size; ++r) EXPECT_EQ(out[r], want[r]) << "rank " << r;
  }
  for (int r = 0; r < world_size; ++r) EXPECT_OK(ranks[r].Failure());
  EXPECT_EQ(group.raised(), 0);
}

TEST(HostBackendTest, TwoShotEqualsTheReferenceWithoutABroker) {
  // A round of 64 tiles and a partial one at world size 2; one partial
  // round at 4.
  ExpectAllReduceEqualsReference(2, Algorithm::kTwoShot, Codec::kInt4, 64 * 16384 + 8 * 17);
  ExpectAllReduceEqualsReference(4, Algorithm::kTwoShot, Codec::kFp, 16384 * 5 + 8);
}

TEST(HostBackendTest, OneShotEqualsTheReferenceWithoutABroker) {
  ExpectAllReduceEqualsReference(2, Algorithm::kOneShot, Codec::kFp, 4096 + 8);
}

// Header and flag pages, then the two-shot slots (2 phases x 64 slots x 32
// KiB): what a rank's object holds besides its one-shot region.
constexpr uint64_t kFixedBytes = 8192 + (uint64_t{4} << 20);
constexpr uint64_t kMiB = uint64_t{1} << 20;

// {st_size, allocated bytes} of rank `rank`'s object in /dev/shm.
std::pair<uint64_t, uint64_t> ObjectBytes(const FakeGroup& group, int rank) {
  struct stat st {};
  const std::string path = "/dev/shm" + group.segment_name() + "-host" + std::to_string(rank);
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return {static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks) * 512};
}

// The one-shot region holds world size shares of the agreed ceiling per
// phase, not of the largest call the layout allows (which was 16 MiB at every
// world size); every byte is reserved; the geometry sent in JOIN stays one.
TEST(HostBackendTest, TheBufferHoldsTheAgreedCeilingsOneShotRegionAllReserved) {
  struct Case {
    int world_size;
    uint64_t ceiling;
    uint64_t want;
  };
  const uint64_t kUncapped = HostBackendOptions{}.one_shot_ceiling_bytes;
  uint64_t geometry = 0;
  for (const Case& c : {Case{2, 4 * kMiB, kFixedBytes + 16 * kMiB},   // ws 2's built-in
                        Case{4, 1 * kMiB, kFixedBytes + 8 * kMiB},    // ws 4's
                        Case{8, 256 * 1024, kFixedBytes + 4 * kMiB},  // ws 8's
                        Case{4, 0, kFixedBytes},                      // QR_ONE_SHOT_MAX_KB=0
                        Case{2, 1000, kFixedBytes + 4096},            // 1008-byte shares
                        Case{4, kUncapped, kFixedBytes + 16 * kMiB}}) {
    SCOPED_TRACE("ws " + std::to_string(c.world_size) + " ceiling " + std::to_string(c.ceiling));
    FakeGroup group;
    Ranks ranks(c.world_size, group, 5000, std::vector<uint64_t>(c.world_size, c.ceiling));
    for (int r = 0; r < c.world_size; ++r) {
      EXPECT_EQ(ObjectBytes(group, r), std::make_pair(c.want, c.want)) << "rank " << r;
      if (geometry == 0) geometry = ranks[r].buffer_bytes();
      EXPECT_EQ(ranks[r].buffer_bytes(), geometry);
    }
    for (const Status& s : ranks.Connect()) EXPECT_OK(s);
  }
  EXPECT_EQ(geometry, kFixedBytes + 16 * kMiB);
}

// The packed shares at the ceiling itself, at world sizes 4 and 8.
TEST(HostBackendTest, OneShotAtTheAgreedCeilingEqualsTheReference) {
  ExpectAllReduceEqualsReference(4, Algorithm::kOneShot, Codec::kFp, kMiB / 2,
                                 std::vector<uint64_t>(4, kMiB));
  ExpectAllReduceEqualsReference(8, Algorithm::kOneShot, Codec::kFp, 128 * 1024 - 8,
                                 std::vector<uint64_t>(8, 256 * 1024));
}

// A call above the ceiling would write past the reserved shares: refused
// before anything is written or waited on.
TEST(HostBackendTest, OneShotAboveTheCeilingIsRefused) {
  FakeGroup group;
  Ranks ranks(2, group, 5000, {64 * 1024, 64 * 1024});
  for (const Status& s : ranks.Connect()) ASSERT_OK(s);
  std::vector<uint16_t> in = Input(0, 32768 + 8), out(in.size());
  AllReduceCall c;
  c.in = in.data();
  c.out = out.data();
  c.count = in.size();
  c.algorithm = Algorithm::kOneShot;
  EXPECT_THAT(ranks[0].AllReduce(c),
              StatusIs(StatusCode::kInternal, HasSubstr("above the group's one-shot ceiling")));
  EXPECT_EQ(group.raised(), 0);
}

// Ranks whose ceilings differ have buffers of different layouts: Connect
// refuses them (the communicator's ceiling check comes first; this is the
// backstop that keeps a rank from writing past a peer's object).
TEST(HostBackendTest, PeersWithAnotherCeilingAreRefusedAtConnect) {
  FakeGroup group;
  Ranks ranks(2, group, 5000, {kMiB, 0});
  std::vector<Status> s = ranks.Connect();
  EXPECT_FALSE(s[0].ok());
  EXPECT_THAT(s[1], StatusIs(StatusCode::kInvalidArgument, HasSubstr("another layout")));
}

TEST(HostBackendTest, StalledPeerTimesOutAndAbortsTheGroup) {
  FakeGroup group;
  Ranks ranks(2, group, /*op_timeout_ms=*/100);
  for (const Status& s : ranks.Connect()) ASSERT_OK(s);
  std::vector<uint16_t> in = Input(0, 64), out(64);
  AllReduceCall c;
  c.in = in.data();
  c.out = out.data();
  c.count = in.size();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(ranks[0].AllReduce(c),
              StatusIs(StatusCode::kTimeout, AllOf(HasSubstr("rank 0"), HasSubstr("from rank 1"),
                                                   HasSubstr("QR_OP_TIMEOUT_MS"))));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // The peers learn of it through the group, with the reason.
  EXPECT_THAT(group.reason(), HasSubstr("QR_OP_TIMEOUT_MS"));
  EXPECT_THAT(group.Check(), StatusIs(StatusCode::kPeerFailed));
  // The backend reports, the communicator keeps: nothing is remembered here.
  EXPECT_OK(ranks[0].Failure());
}

TEST(HostBackendTest, AbortedGroupStopsAWaitingRankWithTheGroupsReason) {
  FakeGroup group;
  Ranks ranks(2, group);
  for (const Status& s : ranks.Connect()) ASSERT_OK(s);
  std::vector<uint16_t> in = Input(0, 64), out(64);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    group.RaiseAbort("rank 1 ran out of memory").IgnoreError();
  });
  AllReduceCall c;
  c.in = in.data();
  c.out = out.data();
  c.count = in.size();
  EXPECT_THAT(ranks[0].AllReduce(c),
              StatusIs(StatusCode::kPeerFailed, HasSubstr("rank 1 ran out of memory")));
  aborter.join();
}

TEST(HostBackendTest, RanksWhoseCallsDifferFailTheGroup) {
  FakeGroup group;
  Ranks ranks(2, group);
  for (const Status& s : ranks.Connect()) ASSERT_OK(s);
  std::vector<std::vector<uint16_t>> in = {Input(0, 128), Input(1, 256)};
  std::vector<std::vector<uint16_t>> out = {std::vector<uint16_t>(128), std::vector<uint16_t>(256)};
  for (const Status& s : ranks.OnEveryRank([&](int r) {
         AllReduceCall c;
         c.in = in[r].data();
         c.out = out[r].data();
         c.count = in[r].size();
         return ranks[r].AllReduce(c);
       })) {
    EXPECT_THAT(s, StatusIs(StatusCode::kPeerFailed, HasSubstr("collective mismatch")));
  }
  EXPECT_THAT(group.reason(), HasSubstr("collective mismatch"));
}

TEST(HostBackendTest, ConnectRefusesAPeerThatIsNotOnTheHost) {
  FakeGroup group;
  Ranks ranks(2, group);
  std::vector<PeerBuffer> members = ranks.Members();
  members[1].kind = ipc::BlobKind::kGpuIpcHandle;
  members[1].device_id = "0000:19:00.0";
  EXPECT_THAT(ranks[0].Connect(members, group),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not on the host backend")));
}

}  // namespace
}  // namespace qr
