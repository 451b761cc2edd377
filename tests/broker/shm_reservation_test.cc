// A container's /dev/shm (Docker's default 64 MiB) filling up after a group
// formed must never kill a rank with SIGBUS: every page of the host
// backend's buffers is reserved (posix_fallocate) when the join makes them,
// so a group that formed keeps all-reducing through every byte of its
// buffers while nothing else fits, and a new group is refused with a clear
// QR_UNAVAILABLE naming the shortage (docs/deploy.md). Runs as root in a
// private mount namespace with a 64 MiB tmpfs on /dev/shm.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ipc/names.h"
#include "tests/broker/harness.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint16_t kOneFp16 = 0x3c00, kTwoFp16 = 0x4000;

uint64_t FreeShmBytes() {
  struct statvfs v {};
  if (::statvfs("/dev/shm", &v) != 0) return 0;
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

// Takes every free page of /dev/shm (as another container process would),
// until released.
class ShmFiller {
 public:
  ShmFiller() {
    name_ = "/qr-test-filler-" + std::to_string(::getpid());
    fd_ = ::shm_open(name_.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    off_t len = 0;
    for (off_t step : {off_t{1} << 20, off_t{4096}}) {
      while (fd_ >= 0 && ::posix_fallocate(fd_, 0, len + step) == 0) len += step;
    }
  }
  ~ShmFiller() {
    if (fd_ >= 0) ::close(fd_);
    ::shm_unlink(name_.c_str());
  }

 private:
  std::string name_;
  int fd_ = -1;
};

class ShmReservationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = EnterPrivateShm(64 << 20);
    if (!why.empty()) GTEST_SKIP() << "private /dev/shm: " << why;
    broker_ = std::make_unique<BrokerProcess>(BrokerBinary(), dir_.path() + "/broker.sock");
    ASSERT_OK(broker_->Start());
  }

  // Both ranks of a host group of 2, joined from two threads.
  std::vector<StatusOr<std::unique_ptr<Communicator>>> JoinTwo(const std::string& group) {
    std::vector<StatusOr<std::unique_ptr<Communicator>>> out;
    out.emplace_back(InternalError("not run"));
    out.emplace_back(InternalError("not run"));
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        JoinOptions o;
        o.broker_socket = dir_.path() + "/broker.sock";
        o.group = group;
        o.rank = r;
        o.world_size = 2;
        o.timeout_ms = 20000;
        out[r] = Communicator::Join(o);
      });
    }
    for (std::thread& t : ranks) t.join();
    return out;
  }

  TempDir dir_;
  std::unique_ptr<BrokerProcess> broker_;
};

TEST_F(ShmReservationTest, FormedGroupKeepsWorkingWhenShmFillsAndANewOneIsRefusedClearly) {
  auto comms = JoinTwo(UniqueGroup("reserved"));
  ASSERT_OK(comms[0].status());
  ASSERT_OK(comms[1].status());

  ShmFiller filler;
  ASSERT_LT(FreeShmBytes(), uint64_t{1} << 20) << "could not fill /dev/shm";

  // One-shot at the built-in ceiling of world size 2 (4 MiB: the whole
  // one-shot region) and two-shot at 64 MiB (every two-shot slot, many
  // times): each touches pages a lazily sized object would only get now,
  // from a /dev/shm with none left.
  for (size_t bytes : {size_t{4} << 20, size_t{64} << 20}) {
    const size_t count = bytes / 2;
    std::vector<Status> results(2, InternalError("not run"));
    std::vector<std::vector<uint16_t>> outs(2, std::vector<uint16_t>(count));
    std::vector<uint16_t> in(count, kOneFp16);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        results[r] = (*comms[r])->AllReduce(in.data(), outs[r].data(), count, DType::kFloat16,
                                            Regime::kFp, /*cast_bf16_to_fp16=*/false);
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(results[r].ok()) << bytes << " bytes, rank " << r << ": " << results[r];
      EXPECT_EQ(outs[r].front(), kTwoFp16);
      EXPECT_EQ(outs[r].back(), kTwoFp16);
      EXPECT_EQ(outs[r][count / 2 + 7], kTwoFp16);
    }
  }

  // A second group finds no room: refused at the join, saying so.
  auto refused = JoinTwo(UniqueGroup("noroom"));
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(refused[r].ok()) << "rank " << r;
    EXPECT_THAT(refused[r].status().message(), HasSubstr("not enough shared memory"))
        << refused[r].status();
    EXPECT_THAT(refused[r].status().message(), HasSubstr("in /dev/shm")) << refused[r].status();
  }
  EXPECT_EQ(::kill(broker_->pid(), 0), 0) << "the broker died";
  for (auto& c : comms) EXPECT_OK((*c)->Leave());
}

}  // namespace
}  // namespace qr::testing
