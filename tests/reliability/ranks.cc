#include "tests/reliability/ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "comm/communicator.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/types.h"

namespace qr::testing::reliability {

std::string RankFile(const WorkerFlags& f, const std::string& what) {
  return f.dir + "/" + f.group + "-" + what + "-r" + std::to_string(f.rank);
}

namespace {

// Input and output of one rank: host memory, or device memory and a stream.
class Buffers {
 public:
  ~Buffers() {
    if (device_ < 0) return;
    if (in_ != nullptr) gpu::Free(in_);
    if (out_ != nullptr) gpu::Free(out_);
    if (stream_ != nullptr) gpu::StreamDestroy(stream_);
  }
  Status Init(int device, int64_t count) {
    device_ = device;
    const size_t bytes = static_cast<size_t>(count) * 2;
    if (device < 0) {
      // 0x3c00 is fp16 1.0: sums of a few ranks stay finite forever.
      host_in_.assign(static_cast<size_t>(count), 0x3c00);
      host_out_.assign(static_cast<size_t>(count), 0);
      in_ = host_in_.data();
      out_ = host_out_.data();
      return OkStatus();
    }
    QR_RETURN_IF_ERROR(gpu::SetDevice(device));
    QR_ASSIGN_OR_RETURN(stream_, gpu::StreamCreate());
    QR_ASSIGN_OR_RETURN(in_, gpu::Malloc(bytes));
    QR_ASSIGN_OR_RETURN(out_, gpu::Malloc(bytes));
    QR_RETURN_IF_ERROR(gpu::MemsetAsync(in_, 0, bytes, stream_));
    return gpu::StreamSynchronize(stream_);
  }
  // One all-reduce, waited for (on a GPU the error shows after the kernel).
  Status AllReduce(Communicator& c, int64_t count, Regime regime) {
    Status s =
        c.AllReduce(in_, out_, static_cast<size_t>(count), DType::kFloat16, regime, false, stream_);
    if (!s.ok() || device_ < 0) return s;
    gpu::StreamSynchronize(stream_).IgnoreError();  // a kernel that gave up still completes
    return c.Check();
  }

 private:
  int device_ = kDeviceHost;
  std::vector<uint16_t> host_in_, host_out_;
  void* in_ = nullptr;
  void* out_ = nullptr;
  gpu::Stream stream_ = nullptr;
};

Regime ParseRegime(const std::string& name) {
  const char* names[] = {"FP", "INT8", "INT6", "INT4", "INT3"};
  for (int i = 0; i < 5; ++i) {
    if (name == names[i]) return static_cast<Regime>(i);
  }
  return Regime::kFp;
}

}  // namespace

int Worker(const WorkerFlags& f) {
  Buffers buffers;
  if (Status s = buffers.Init(f.device, std::max<int64_t>(f.count, 8)); !s.ok()) {
    std::fprintf(stderr, "rank %d: buffers: %s\n", f.rank, s.ToString().c_str());
    return 2;
  }
  const int fds_before = OpenFds(::getpid());  // after the GPU runtime opened its own
  JoinOptions o;
  o.group = f.group;
  o.rank = f.rank;
  o.world_size = f.world_size;
  o.device = f.device;
  o.timeout_ms = 60000;
  auto comm = Communicator::Join(o);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: join: %s\n", f.rank, comm.status().ToString().c_str());
    return 3;
  }
  const Regime regime = ParseRegime(f.regime);
  Status s = buffers.AllReduce(**comm, std::max<int64_t>(f.count, 8), regime);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: first all-reduce: %s\n", f.rank, s.ToString().c_str());
    return 4;
  }
  if (!WriteFile(RankFile(f, "ready"), "1\n")) return 5;
  if (f.mode == "hold") {
    while (::access((f.dir + "/" + f.group + "-stop").c_str(), F_OK) != 0) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    return (*comm)->Leave().ok() ? 0 : 6;
  }
  const auto give_up = Clock::now() + std::chrono::seconds(120);
  while (s.ok() && Clock::now() < give_up) s = buffers.AllReduce(**comm, f.count, regime);
  const int64_t failed_at = MonotonicNanos();
  (*comm)->Leave().IgnoreError();  // the broker may be gone: leaving still frees
  comm->reset();
  const int fds_after = OpenFds(::getpid());
  std::string message = s.message();
  std::replace(message.begin(), message.end(), '\n', ' ');
  return WriteFile(RankFile(f, "result"), std::to_string(static_cast<int>(s.code())) + " " +
                                              std::to_string(failed_at) + " " +
                                              std::to_string(fds_before) + " " +
                                              std::to_string(fds_after) + " " + message + "\n")
             ? 0
             : 5;
}

namespace {

std::vector<std::string> WorkerEnv(int device) {
  std::vector<std::string> env = {"QR_LOG_LEVEL=warn"};
  if (device >= 0) env.push_back("QR_ALLOW_SHARED_DEVICE=1");  // every rank on one GPU
  return env;
}

}  // namespace

StatusOr<Ranks> SpawnRanks(const WorkerFlags& base) {
  Ranks ranks;
  ranks.flags = base;
  for (int r = 0; r < base.world_size; ++r) {
    std::vector<std::string> argv = {SelfExecutablePath(),
                                     "_worker",
                                     "--group",
                                     base.group,
                                     "--dir",
                                     base.dir,
                                     "--mode",
                                     base.mode,
                                     "--rank",
                                     std::to_string(r),
                                     "--ws",
                                     std::to_string(base.world_size),
                                     "--device",
                                     std::to_string(base.device),
                                     "--count",
                                     std::to_string(base.count),
                                     "--regime",
                                     base.regime};
    QR_ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, WorkerEnv(base.device)));
    ranks.pids.push_back(pid);
  }
  return ranks;
}

namespace {

// Whether the child has exited, leaving it to be reaped.
bool Exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

}  // namespace

bool AllReady(const Ranks& ranks, milliseconds timeout) {
  WorkerFlags f = ranks.flags;
  bool exited = false;
  const bool ready = WaitUntil(
      [&] {
        exited = std::any_of(ranks.pids.begin(), ranks.pids.end(), Exited);
        if (exited) return true;
        for (f.rank = 0; f.rank < f.world_size; ++f.rank) {
          if (::access(RankFile(f, "ready").c_str(), F_OK) != 0) return false;
        }
        return true;
      },
      timeout);
  return ready && !exited;
}

}  // namespace qr::testing::reliability
