// qr-reliability: the figures of docs/broker.md "Reliability" (client side).
//
//   qr-reliability peer-kill [--setups broker,restart,none] [--sizes-mib 32,128]
//                            [--repeat 20] [--regime FP] [--device N]
//   qr-reliability cycles [--cycles 10000] [--minutes 15] [--snapshot-every 1000]  (host)
//   qr-reliability shm-needs [--device N]
//   qr-reliability shm-full          (in a private mount namespace, see below)
//   qr-reliability reserve-cost [--repeat 15]
//
// peer-kill: two ranks (processes of this binary) stream fp16 all-reduces of
// the given size; rank 1 is SIGKILLed in the middle of one and the time until
// rank 0's call returns QR_PEER_FAILED is measured on CLOCK_MONOTONIC. Setups:
// the broker runs throughout (broker); the broker is SIGKILLed and restarted
// while the group is READY, and the new broker adopts it (restart); the broker
// is SIGKILLed after the group formed and not restarted (none). After each
// trial: the survivor's descriptors after Leave against before Join, the
// group's /dev/shm objects, the broker's descriptors.
//
// cycles: join/leave cycles of a two-rank host group (ranks are threads of
// this process) against one broker, with the broker's RSS and descriptors,
// ours, and this uid's /dev/shm objects at every snapshot.
//
// shm-needs: forms groups of world size 2, 4 and 8 (processes) and reports
// what they hold in /dev/shm, per group and per rank.
//
// reserve-cost: times reserving (posix_fallocate) and freeing a host buffer
// of 4 to 20 MiB, what every host join and leave pays.
//
// shm-full: refuses to run unless /dev/shm is a small tmpfs (at most 1 GiB),
// e.g. Docker's default of 64 MiB in a private mount namespace:
//   unshare -m sh -c 'mount --make-rprivate / &&
//     mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm && qr-reliability shm-full'
// A second host group that does not fit, and one on a completely full
// /dev/shm, must fail their joins with QR_UNAVAILABLE "not enough shared
// memory: need N MiB in /dev/shm, M free" within the join timeout (no rank
// hangs), the broker must answer, and once space is freed the same group must
// form; nothing may be left behind. Exit code 1 when an expectation fails.
//
// --device N runs the ranks on GPU N (all ranks on that one GPU, under MPS,
// with QR_ALLOW_SHARED_DEVICE=1 set for them); default: the host backend.
// The broker is --broker, else qr-broker beside this binary, else the
// runfile.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "comm/communicator.h"
#include "common/shm_object.h"
#include "common/status.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "ipc/broker_binary.h"
#include "ipc/broker_client.h"
#include "ipc/names.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/types.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/harness.h"
#include "tests/util/process.h"

namespace qr::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// --- small measurements -------------------------------------------------------

int OpenFds(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return pid == ::getpid() ? n - 1 : n;  // our own DIR's descriptor
}

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// This uid's quickreduce objects in /dev/shm (names without the slash).
std::vector<std::string> OurShmObjects() {
  return ShmObjectsContaining(ipc::UserPrefix(::getuid()).substr(1));
}

size_t ShmEntries() {
  size_t n = 0;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

struct ShmSpace {
  uint64_t total = 0, free = 0;
};

ShmSpace DevShmSpace() {
  struct statvfs v {};
  if (::statvfs("/dev/shm", &v) != 0) return {};
  return {static_cast<uint64_t>(v.f_blocks) * v.f_frsize,
          static_cast<uint64_t>(v.f_bavail) * v.f_frsize};
}

// Bytes the named /dev/shm object holds (allocated blocks, not its size).
uint64_t AllocatedBytes(const std::string& name) {
  struct stat st {};
  if (::stat(("/dev/shm/" + name).c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

struct Summary {
  double min = 0, median = 0, max = 0;
};

Summary Summarise(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

std::string MiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

bool WaitUntil(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

// --- the broker ---------------------------------------------------------------

// A broker of our own on a private socket, which every client of this
// process and of its children uses (QR_BROKER_SOCKET, no autostart).
class Broker {
 public:
  Broker(std::string binary, std::string dir, std::vector<std::string> env = {})
      : binary_(std::move(binary)), socket_(dir + "/broker.sock"), env_(std::move(env)) {
    ::setenv("QR_BROKER_SOCKET", socket_.c_str(), 1);
    ::setenv("QR_BROKER_AUTOSTART", "0", 1);
  }
  Status Start() {
    process_ = BrokerProcess(binary_, socket_, {}, env_);
    return process_.Start();
  }
  // Start, saying why on stderr when it fails.
  bool StartOrSay() {
    Status s = Start();
    if (!s.ok()) std::fprintf(stderr, "broker: %s\n", s.ToString().c_str());
    return s.ok();
  }
  void Kill() { process_.Signal(SIGKILL); }  // reaps it
  void Stop() { process_.Stop(); }
  pid_t pid() const { return process_.pid(); }
  bool running() const { return process_.pid() > 0 && ::kill(process_.pid(), 0) == 0; }
  const std::string& socket() const { return socket_; }
  // The group's entry in the status document (null when absent or no answer).
  nlohmann::json Group(const std::string& name) const {
    auto text = ipc::QueryStatus(socket_, milliseconds(2000));
    if (!text.ok()) return nullptr;
    nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded() || !doc.contains("groups")) return nullptr;
    for (const auto& g : doc["groups"]) {
      if (g.value("name", "") == name) return g;
    }
    return nullptr;
  }
  bool Answers() const { return ipc::QueryStatus(socket_, milliseconds(2000)).ok(); }

 private:
  std::string binary_, socket_;
  std::vector<std::string> env_;
  BrokerProcess process_;
};

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/qr-rel-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    const std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// --- the rank processes -------------------------------------------------------

struct WorkerFlags {
  std::string group, dir, mode = "stream";  // stream | hold
  int rank = 0, world_size = 2, device = kDeviceHost;
  int64_t count = 0;
  std::string regime = "FP";
};

std::string RankFile(const WorkerFlags& f, const std::string& what) {
  return f.dir + "/" + f.group + "-" + what + "-r" + std::to_string(f.rank);
}

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

// stream: all-reduces until one fails (or 120 s), then records
//   <status code> <monotonic ns of the failure> <fds before Join> <fds after Leave> <message>
// hold: joins, runs one all-reduce, says so, waits for the stop file, leaves.
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

struct Ranks {
  std::vector<pid_t> pids;
  WorkerFlags flags;
};

std::vector<std::string> WorkerEnv(int device) {
  std::vector<std::string> env = {"QR_LOG_LEVEL=warn"};
  if (device >= 0) env.push_back("QR_ALLOW_SHARED_DEVICE=1");  // every rank on one GPU
  return env;
}

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

// Whether the child has exited, leaving it to be reaped.
bool Exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

// Waits until every rank has completed its first all-reduce; false at the
// timeout or as soon as a rank exited (it said why on stderr).
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

// --- peer-kill ----------------------------------------------------------------

struct Trial {
  bool ok = false;
  double ms = 0;         // SIGKILL to the survivor's PEER_FAILED
  double reaped_ms = 0;  // SIGKILL to the victim reaped here
  int fds_before = 0, fds_after = 0;
  std::vector<std::string> left_over;  // the group's objects once it ended
  int broker_fds = -1;                 // after the group ended (-1: no broker)
  std::string note;
};

Trial RunPeerKill(Broker& broker, const std::string& setup, const WorkerFlags& base,
                  int fresh_broker_fds, std::mt19937& rng) {
  Trial t;
  if (!broker.running()) {
    if (Status s = broker.Start(); !s.ok()) {
      t.note = "broker: " + s.ToString();
      return t;
    }
  }
  auto ranks = SpawnRanks(base);
  if (!ranks.ok()) {
    t.note = ranks.status().ToString();
    return t;
  }
  const pid_t survivor = ranks->pids[0], victim = ranks->pids[1];
  auto fail = [&](const std::string& why) {
    WaitAll(ranks->pids, milliseconds(0));  // kills and reaps what still runs
    t.note = why;
    return t;
  };
  if (!AllReady(*ranks, milliseconds(120000))) return fail("the group did not form");
  if (setup == "restart" || setup == "none") {
    broker.Kill();
    if (setup == "restart") {
      if (Status s = broker.Start(); !s.ok()) return fail("restart: " + s.ToString());
      const bool adopted = WaitUntil(
          [&] {
            nlohmann::json g = broker.Group(base.group);
            return !g.is_null() && g.value("state", "") == "READY" && g.value("adopted", false);
          },
          milliseconds(5000));
      if (!adopted) return fail("the restarted broker did not adopt the group as READY");
    }
  }
  // Some calls after the last event, then a kill at a random point of a call.
  std::this_thread::sleep_for(milliseconds(20 + std::uniform_int_distribution<int>(0, 60)(rng)));
  if (WaitExit(survivor, milliseconds(0)).ok()) return fail("the survivor ended before the kill");
  const int64_t killed_at = MonotonicNanos();
  ::kill(victim, SIGKILL);
  auto victim_code = WaitExit(victim, milliseconds(10000));
  if (!victim_code.ok() || *victim_code != 128 + SIGKILL) return fail("the victim did not die");
  // Its exit (mappings torn down, then descriptors and locks dropped) as this
  // process's wait saw it, 2 ms polls.
  t.reaped_ms = static_cast<double>(MonotonicNanos() - killed_at) / 1e6;
  auto code = WaitExit(survivor, milliseconds(60000));
  if (!code.ok()) {
    ::kill(survivor, SIGKILL);
    (void)WaitExit(survivor, milliseconds(5000));
    return fail("the survivor did not see the kill within 60 s");
  }
  WorkerFlags f = base;
  f.rank = 0;
  const std::string result = ReadFile(RankFile(f, "result"));
  int status = -1;
  long long at = 0;
  int consumed = 0;
  if (*code != 0 || std::sscanf(result.c_str(), "%d %lld %d %d %n", &status, &at, &t.fds_before,
                                &t.fds_after, &consumed) < 4) {
    return fail("survivor exit " + std::to_string(*code) + ": " + result);
  }
  t.note = result.substr(static_cast<size_t>(consumed));
  if (!t.note.empty() && t.note.back() == '\n') t.note.pop_back();
  t.ms = static_cast<double>(at - killed_at) / 1e6;
  t.ok = status == static_cast<int>(StatusCode::kPeerFailed);
  if (!t.ok) t.note = "survivor got status " + std::to_string(status) + ": " + t.note;
  // A broker removes the ended group's objects; without one they stay until
  // the next broker starts (or qrctl gc).
  if (broker.running()) {
    WaitUntil([&] { return ShmObjectsContaining(base.group).empty(); }, milliseconds(3000));
    WaitUntil([&] { return broker.Group(base.group).is_null(); }, milliseconds(3000));
    // Our status queries' connections close on the broker's side a little
    // later.
    WaitUntil([&] { return OpenFds(broker.pid()) <= fresh_broker_fds; }, milliseconds(2000));
    t.broker_fds = OpenFds(broker.pid());
  }
  t.left_over = ShmObjectsContaining(base.group);
  return t;
}

int PeerKill(const std::string& broker_bin, const std::string& setups_text,
             const std::string& sizes_text, int repeat, const std::string& regime, int device) {
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const int fresh_broker_fds = OpenFds(broker.pid());
  std::printf("broker %s (fresh: %d fds), %s, fp16 %s, world size 2\n", broker_bin.c_str(),
              fresh_broker_fds,
              device < 0 ? "host backend" : ("GPU " + std::to_string(device)).c_str(),
              regime.c_str());
  std::mt19937 rng(12345);
  const std::string token = UniqueToken().substr(0, 8);
  std::stringstream setups(setups_text);
  bool all_ok = true;
  std::vector<std::string> table;
  for (std::string setup; std::getline(setups, setup, ',');) {
    if (setup != "broker" && setup != "restart" && setup != "none") {
      std::fprintf(stderr, "unknown setup '%s' (broker, restart, none)\n", setup.c_str());
      return 64;
    }
    for (int mib : ParseList(sizes_text)) {
      std::vector<double> ms, reaped;
      int failures = 0, leaks = 0, fd_leaks = 0, broker_fd_max = -1;
      for (int i = 0; i < repeat; ++i) {
        WorkerFlags f;
        f.group = "pk-" + token + "-" + setup + "-" + std::to_string(mib) + "-" + std::to_string(i);
        f.dir = dir.path();
        f.count = static_cast<int64_t>(mib) << 19;  // fp16 values
        f.device = device;
        f.regime = regime;
        Trial t = RunPeerKill(broker, setup, f, fresh_broker_fds, rng);
        std::printf(
            "%-8s %4d MiB #%-3d %s %8.2f ms (victim reaped %6.2f ms)  survivor fds %d -> "
            "%d  left in /dev/shm: %zu%s  broker fds %d  | %s\n",
            setup.c_str(), mib, i, t.ok ? "PEER_FAILED" : "FAILED     ", t.ms, t.reaped_ms,
            t.fds_before, t.fds_after, t.left_over.size(),
            t.left_over.empty() ? "" : (" (" + t.left_over.front() + ", ...)").c_str(),
            t.broker_fds, t.note.c_str());
        std::fflush(stdout);
        if (!t.ok) {
          ++failures;
          continue;
        }
        ms.push_back(t.ms);
        reaped.push_back(t.reaped_ms);
        if (!t.left_over.empty()) ++leaks;
        if (t.fds_after != t.fds_before) ++fd_leaks;
        broker_fd_max = std::max(broker_fd_max, t.broker_fds);
        if (setup == "none") {
          // What a later broker does with them: its start-up sweep.
          if (!broker.StartOrSay()) return 2;
          if (!WaitUntil([&] { return ShmObjectsContaining(f.group).empty(); },
                         milliseconds(3000))) {
            std::printf("  still in /dev/shm after a broker start: %zu objects\n",
                        ShmObjectsContaining(f.group).size());
          }
        }
      }
      const Summary s = Summarise(ms), r = Summarise(reaped);
      char line[512];
      std::snprintf(line, sizeof(line),
                    "%-8s %4d MiB: n=%zu  min %.1f  median %.1f  max %.1f ms (victim reaped %.1f / "
                    "%.1f / %.1f);  failed trials %d, trials leaving objects %d, survivor fd "
                    "leaks %d, broker fds max %d",
                    setup.c_str(), mib, ms.size(), s.min, s.median, s.max, r.min, r.median, r.max,
                    failures, leaks, fd_leaks, broker_fd_max);
      table.push_back(line);
      all_ok = all_ok && failures == 0 && fd_leaks == 0 && (setup == "none" || leaks == 0) &&
               (broker_fd_max < 0 || broker_fd_max == fresh_broker_fds);
    }
  }
  std::printf("\nSIGKILL of rank 1 to rank 0's PEER_FAILED (fresh broker: %d fds)\n",
              fresh_broker_fds);
  for (const std::string& line : table) std::printf("%s\n", line.c_str());
  return all_ok ? 0 : 1;
}

// --- cycles -------------------------------------------------------------------

void Snapshot(const char* when, int cycle, double seconds, const Broker& broker,
              const std::string& group) {
  std::printf(
      "%-7s cycle %6d  %7.1f s  broker RSS %6ld KiB, %3d fds  |  ours RSS %6ld KiB, %3d "
      "fds  |  /dev/shm: %zu of the group, %zu of this uid, %zu entries\n",
      when, cycle, seconds, RssKiB(broker.pid()), OpenFds(broker.pid()), RssKiB(::getpid()),
      OpenFds(::getpid()), ShmObjectsContaining(group).size(), OurShmObjects().size(),
      ShmEntries());
  std::fflush(stdout);
}

int Cycles(const std::string& broker_bin, int cycles, double minutes, int snapshot_every,
           int world_size) {
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const std::string group = "cycles-" + UniqueToken().substr(0, 8);
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(minutes * 60));
  constexpr int kWarmup = 20;
  Barrier barrier(world_size);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<double> cycle_ms, join_ms, leave_ms;
  // Reserved: the samples must not show up as our own growth.
  for (auto* v : {&cycle_ms, &join_ms, &leave_ms}) v->reserve(static_cast<size_t>(cycles) + 1);
  int done = 0;
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      JoinOptions o;
      o.group = group;
      o.rank = rank;
      o.world_size = world_size;
      o.timeout_ms = 30000;
      for (int i = 0;; ++i) {
        barrier.Wait();
        if (rank == 0) {
          if (i == kWarmup) Snapshot("before", 0, seconds(), broker, group);
          if (i > kWarmup && (i - kWarmup) % snapshot_every == 0) {
            Snapshot("during", i - kWarmup, seconds(), broker, group);
          }
          if (i - kWarmup >= cycles || Clock::now() >= stop_at || failures > 0) stop = true;
        }
        barrier.Wait();
        if (stop) return;
        const auto t0 = Clock::now();
        auto c = Communicator::Join(o);
        const auto t1 = Clock::now();
        if (c.ok()) {
          if (!(*c)->Leave().ok()) ++failures;
          c->reset();
        } else {
          std::fprintf(stderr, "cycle %d rank %d: %s\n", i, rank, c.status().ToString().c_str());
          ++failures;
        }
        const auto t2 = Clock::now();
        barrier.Wait();  // all left: the cycle ends here
        if (rank == 0 && i >= kWarmup) {
          cycle_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          join_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          leave_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
          done = i - kWarmup + 1;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The broker removes the last generation's segment when it sees both leave.
  WaitUntil([&] { return ShmObjectsContaining(group).empty(); }, milliseconds(3000));
  Snapshot("after", done, seconds(), broker, group);
  const Summary c = Summarise(cycle_ms), j = Summarise(join_ms), l = Summarise(leave_ms);
  std::printf("%d cycles (host backend, world size %d) in %.1f s, %d failures\n", done, world_size,
              seconds(), failures.load());
  std::printf("cycle  min %.1f  median %.1f  max %.1f ms\n", c.min, c.median, c.max);
  std::printf("join   min %.1f  median %.1f  max %.1f ms (rank 0, to READY)\n", j.min, j.median,
              j.max);
  std::printf("leave  min %.1f  median %.1f  max %.1f ms (rank 0)\n", l.min, l.median, l.max);
  std::printf("group objects left: %zu\n", ShmObjectsContaining(group).size());
  return failures == 0 && ShmObjectsContaining(group).empty() ? 0 : 1;
}

// --- shm-needs ----------------------------------------------------------------

int ShmNeeds(const std::string& broker_bin, int device) {
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const std::string token = UniqueToken().substr(0, 8);
  std::printf("/dev/shm held by a READY group, %s backend (allocated blocks)\n",
              device < 0 ? "host" : "GPU");
  int rc = 0;
  for (int ws : {2, 4, 8}) {
    WorkerFlags f;
    f.group = "needs-" + token + "-" + std::to_string(ws);
    f.dir = dir.path();
    f.mode = "hold";
    f.world_size = ws;
    f.device = device;
    const uint64_t free_before = DevShmSpace().free;
    auto ranks = SpawnRanks(f);
    if (!ranks.ok() || !AllReady(*ranks, milliseconds(60000))) {
      std::printf("ws %d: the group did not form\n", ws);
      rc = 1;
    } else {
      uint64_t total = 0, segment = 0;
      std::vector<std::string> objects = ShmObjectsContaining(f.group);
      std::sort(objects.begin(), objects.end());
      for (const std::string& name : objects) {
        const uint64_t bytes = AllocatedBytes(name);
        total += bytes;
        // The segment's name is the shortest: data objects extend it.
        if (name.size() == objects.front().size()) segment += bytes;
      }
      const uint64_t dropped = free_before - DevShmSpace().free;
      std::printf(
          "ws %d: %zu objects, %s in all (statvfs: %s less free); segment %llu KiB, "
          "per rank %llu KiB\n",
          ws, objects.size(), MiB(total).c_str(), MiB(dropped).c_str(),
          static_cast<unsigned long long>(segment >> 10),
          static_cast<unsigned long long>((total - segment) / static_cast<uint64_t>(ws) >> 10));
    }
    WriteFile(dir.path() + "/" + f.group + "-stop", "1\n");
    if (ranks.ok()) {
      for (int code : WaitAll(ranks->pids, milliseconds(30000))) rc |= code != 0;
    }
  }
  return rc;
}

// --- reserve-cost -------------------------------------------------------------

// What a host join pays to reserve its buffer and a leave to free it:
// ShmMapping::Create (shm_open, posix_fallocate, mmap) and its destruction
// (munmap, shm_unlink), at the sizes a host rank could need.
int ReserveCost(int repeat) {
  const std::string name = "/quickreduce-reliability-reserve-" + UniqueToken().substr(0, 8);
  for (int mib : {4, 8, 12, 20}) {
    std::vector<double> create_ms, free_ms;
    for (int i = 0; i < repeat; ++i) {
      const auto t0 = Clock::now();
      auto m = ShmMapping::Create(name, static_cast<size_t>(mib) << 20);
      const auto t1 = Clock::now();
      if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
        return 1;
      }
      { ShmMapping gone = std::move(m).value(); }
      const auto t2 = Clock::now();
      create_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      free_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    const Summary c = Summarise(create_ms), f = Summarise(free_ms);
    std::printf(
        "%2d MiB: reserve (create) min %.1f median %.1f max %.1f ms; free (unmap, "
        "unlink) min %.1f median %.1f max %.1f ms\n",
        mib, c.min, c.median, c.max, f.min, f.median, f.max);
  }
  return 0;
}

// --- shm-full -----------------------------------------------------------------

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

int Main(int argc, char** argv) {
  CLI::App app{"qr-reliability: fault and lifecycle figures (docs/broker.md, Reliability)"};
  app.require_subcommand(1);
  std::string broker_bin;
  int device = kDeviceHost;
  app.add_option("--broker", broker_bin,
                 "the qr-broker binary (default: beside this one, as tools/gpu/stage.sh lays "
                 "them out, else in the runfiles)");
  app.add_option("--device", device, "GPU ordinal for every rank (default: the host backend)");

  CLI::App* kill = app.add_subcommand("peer-kill", "SIGKILL a peer mid all-reduce");
  std::string setups = "broker,restart,none", sizes = "32,128", regime = "FP";
  int repeat = 20;
  kill->add_option("--setups", setups, "comma-separated: broker, restart, none");
  kill->add_option("--sizes-mib", sizes, "message sizes in MiB (fp16)");
  kill->add_option("--repeat", repeat, "trials per setup and size");
  kill->add_option("--regime", regime, "FP, INT8, INT6, INT4, INT3");

  CLI::App* cycles = app.add_subcommand("cycles", "join/leave cycles against one broker");
  int n_cycles = 10000, every = 1000;
  double minutes = 15;
  cycles->add_option("--cycles", n_cycles, "cycles to run");
  cycles->add_option("--minutes", minutes, "stop after this long even if fewer ran");
  cycles->add_option("--snapshot-every", every, "cycles between two resource snapshots");
  int cycles_world_size = 2;
  cycles->add_option("--world-size", cycles_world_size, "ranks (threads) per group")
      ->check(CLI::IsMember({2, 4, 8}));

  CLI::App* needs = app.add_subcommand("shm-needs", "what groups hold in /dev/shm");
  CLI::App* reserve = app.add_subcommand("reserve-cost", "time to reserve and free host buffers");
  int reserve_repeat = 15;
  reserve->add_option("--repeat", reserve_repeat, "samples per size");
  CLI::App* full = app.add_subcommand("shm-full", "joins on a full /dev/shm (private tmpfs)");

  WorkerFlags w;
  CLI::App* worker = app.add_subcommand("_worker", "one rank (internal)");
  worker->group("");  // hidden
  worker->add_option("--group", w.group)->required();
  worker->add_option("--dir", w.dir)->required();
  worker->add_option("--mode", w.mode);
  worker->add_option("--rank", w.rank);
  worker->add_option("--ws", w.world_size);
  worker->add_option("--device", w.device);
  worker->add_option("--count", w.count);
  worker->add_option("--regime", w.regime);
  for (CLI::App* sub : {kill, cycles, needs, full}) {
    sub->add_option("--device", device, "GPU ordinal for every rank (default: the host backend)");
  }
  CLI11_PARSE(app, argc, argv);

  if (worker->parsed()) return Worker(w);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (reserve->parsed()) return ReserveCost(reserve_repeat);  // no broker
  // Never one on $PATH: the figures are of the broker built with this tool.
  StatusOr<std::string> found =
      ipc::FindBrokerBinary(ipc::BrokerSearchFromEnvironment(broker_bin, /*search_path=*/false));
  if (!found.ok()) {
    std::fprintf(stderr, "qr-reliability: %s (give --broker)\n", found.status().ToString().c_str());
    return 64;
  }
  broker_bin = *found;
  if (kill->parsed()) return PeerKill(broker_bin, setups, sizes, repeat, regime, device);
  if (cycles->parsed()) {
    if (device >= 0) {
      // Its ranks are threads of one process, which cannot open its own GPU
      // IPC handles.
      std::fprintf(stderr, "cycles measures the host backend only\n");
      return 64;
    }
    return Cycles(broker_bin, n_cycles, minutes, every, cycles_world_size);
  }
  if (needs->parsed()) return ShmNeeds(broker_bin, device);
  if (full->parsed()) {
    if (device >= 0) {
      std::fprintf(stderr, "shm-full measures the host backend (GPU groups hold 12 KiB)\n");
      return 64;
    }
    return ShmFull(broker_bin);
  }
  return 64;
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) { return qr::testing::Main(argc, argv); }
