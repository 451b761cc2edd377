#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "common/syscall.h"
#include "tests/e2e/harness.h"
#include "tests/reliability/subcommands.h"
#include "tests/reliability/support.h"

namespace qr::testing::reliability {

namespace {

// Joins `world_size` host ranks of `group` on threads of this process at once.
struct Formation {
  std::vector<std::unique_ptr<Communicator>> members;
  std::vector<Status> errors;  // per rank, OK where it joined
  double slowest_ms = 0;       // the last rank's join returned after this long
  bool ok() const {
    return std::all_of(errors.begin(), errors.end(), [](const Status& s) { return s.ok(); });
  }
};

Formation Form(const std::string& group, int world_size, int timeout_ms) {
  Formation f;
  f.members.resize(static_cast<size_t>(world_size));
  f.errors.resize(static_cast<size_t>(world_size));
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      JoinOptions o;
      o.group = group;
      o.rank = r;
      o.world_size = world_size;
      o.timeout_ms = timeout_ms;
      auto c = Communicator::Join(o);
      if (c.ok()) {
        f.members[static_cast<size_t>(r)] = std::move(c).value();
      } else {
        f.errors[static_cast<size_t>(r)] = c.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  f.slowest_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return f;
}

void LeaveAll(Formation& f) {
  for (auto& m : f.members) {
    if (m != nullptr) m->Leave().IgnoreError();
    m.reset();
  }
}

class Checks {
 public:
  void Expect(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    std::fflush(stdout);
    failed_ = failed_ || !ok;
  }
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
};

void ReportFormation(const Formation& f, const std::string& what) {
  std::printf("  %s: returned after %.0f ms\n", what.c_str(), f.slowest_ms);
  for (size_t r = 0; r < f.errors.size(); ++r) {
    std::printf("    rank %zu: %s\n", r,
                f.errors[r].ok() ? "joined" : f.errors[r].ToString().c_str());
  }
}

// The expected refusal: QR_UNAVAILABLE with the message, for at least one
// rank; every other rank fails too (the group cannot form), none hangs.
bool RefusedForSpace(const Formation& f) {
  bool any = false;
  for (const Status& s : f.errors) {
    if (s.ok()) return false;
    if (s.code() == StatusCode::kUnavailable &&
        s.message().find("not enough shared memory: need ") != std::string::npos &&
        s.message().find(" MiB in /dev/shm, ") != std::string::npos &&
        s.message().find(" MiB free") != std::string::npos) {
      any = true;
    }
  }
  return any;
}

}  // namespace

int ShmFull(const std::string& broker_bin) {
  const ShmSpace space = DevShmSpace();
  if (space.total == 0 || space.total > (1ull << 30)) {
    std::fprintf(stderr,
                 "shm-full fills /dev/shm (%s here): run it in a private mount namespace with a "
                 "small tmpfs there:\n  unshare -m sh -c 'mount --make-rprivate / && mount -t "
                 "tmpfs -o size=64m,mode=1777 tmpfs /dev/shm && %s shm-full'\n",
                 MiB(space.total).c_str(), SelfExecutablePath().c_str());
    return 64;
  }
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const int broker_fds = OpenFds(broker.pid());
  const int our_fds = OpenFds(::getpid());
  std::printf("/dev/shm: %s, %s free; broker %d fds\n", MiB(space.total).c_str(),
              MiB(space.free).c_str(), broker_fds);
  const std::string token = UniqueToken().substr(0, 8);
  const std::string a = "full-a-" + token, b = "full-b-" + token, c = "full-c-" + token;
  constexpr int kTimeoutMs = 10000;
  Checks check;

  Formation fa = Form(a, 2, kTimeoutMs);
  ReportFormation(fa, "group A, world size 2");
  check.Expect(fa.ok(), "a host group of 2 forms (" + MiB(space.free - DevShmSpace().free) + ")");
  Formation fb = Form(b, 2, kTimeoutMs);
  ReportFormation(fb, "group B, world size 2, while A holds its buffers");
  check.Expect(RefusedForSpace(fb), "B is refused: QR_UNAVAILABLE \"not enough shared memory\"");
  check.Expect(fb.slowest_ms < kTimeoutMs, "no rank of B waited out its join timeout");
  check.Expect(broker.Answers(), "the broker answers");
  check.Expect(WaitUntil([&] { return ShmObjectsContaining(b).empty(); }, milliseconds(3000)),
               "nothing of B is left in /dev/shm");
  LeaveAll(fa);
  LeaveAll(fb);
  check.Expect(WaitUntil([&] { return ShmObjectsContaining(a).empty(); }, milliseconds(3000)),
               "A left: nothing of A is left");
  Formation fb2 = Form(b, 2, kTimeoutMs);
  check.Expect(fb2.ok(), "B forms once A has left");
  if (fb2.ok()) {
    Status sums[2];
    std::vector<std::thread> ts;
    std::vector<uint16_t> bufs[2] = {std::vector<uint16_t>(4096, 0x3c00),
                                     std::vector<uint16_t>(4096, 0x3c00)};
    for (int r = 0; r < 2; ++r) {
      ts.emplace_back([&, r] {
        sums[r] = fb2.members[static_cast<size_t>(r)]->AllReduce(
            bufs[r].data(), bufs[r].data(), bufs[r].size(), DType::kFloat16, Regime::kFp, false);
      });
    }
    for (auto& t : ts) t.join();
    check.Expect(sums[0].ok() && sums[1].ok() && bufs[0][0] == 0x4000,
                 "and all-reduces (1 + 1 = 2)");
  }
  LeaveAll(fb2);

  // A /dev/shm without a free page: not even the group segment fits.
  const std::string filler = "/dev/shm/quickreduce-reliability-filler-" + token;
  const int fd = ::open(filler.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  off_t len = 0;
  for (off_t step = 16 << 20; step >= 4096; step /= 2) {
    while (fd >= 0 && ::posix_fallocate(fd, 0, len + step) == 0) len += step;
  }
  std::printf("  filled: %s free\n", MiB(DevShmSpace().free).c_str());
  Formation fc = Form(c, 2, kTimeoutMs);
  ReportFormation(fc, "group C, world size 2, on a full /dev/shm");
  check.Expect(RefusedForSpace(fc), "C is refused: QR_UNAVAILABLE \"not enough shared memory\"");
  check.Expect(fc.slowest_ms < kTimeoutMs, "no rank of C waited out its join timeout");
  check.Expect(broker.Answers(), "the broker answers");
  LeaveAll(fc);
  if (fd >= 0) ::close(fd);
  ::unlink(filler.c_str());
  Formation fc2 = Form(c, 2, kTimeoutMs);
  check.Expect(fc2.ok(), "C forms once the space is free again");
  LeaveAll(fc2);

  // What Docker's default (64 MiB) holds, stated in docs/broker.md.
  for (int ws : {4, 8}) {
    Formation big = Form("full-ws" + std::to_string(ws) + "-" + token, ws, kTimeoutMs);
    ReportFormation(big, "a host group of " + std::to_string(ws));
    if (!big.ok()) {
      check.Expect(RefusedForSpace(big) && big.slowest_ms < kTimeoutMs,
                   "world size " + std::to_string(ws) + " is refused cleanly");
    }
    LeaveAll(big);
  }

  check.Expect(WaitUntil([&] { return OurShmObjects().empty(); }, milliseconds(3000)),
               "none of our objects is left in /dev/shm");
  check.Expect(WaitUntil([&] { return OpenFds(broker.pid()) == broker_fds; }, milliseconds(3000)),
               "the broker holds as many descriptors as at start (" + std::to_string(broker_fds) +
                   ", now " + std::to_string(OpenFds(broker.pid())) + ")");
  check.Expect(OpenFds(::getpid()) == our_fds, "so do we (" + std::to_string(our_fds) + ", now " +
                                                   std::to_string(OpenFds(::getpid())) + ")");
  check.Expect(broker.running(), "the broker is still running");
  return check.failed() ? 1 : 0;
}

}  // namespace qr::testing::reliability
