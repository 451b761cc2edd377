#include "tests/util/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <utility>

#include "common/subprocess.h"
#include "ipc/broker_binary.h"
#include "ipc/broker_client.h"

namespace qr::testing {
namespace {

std::string& GivenBrokerBinary() {
  static std::string path;
  return path;
}

// Reaps pid within timeout, else kills and reaps it (*killed says so); the
// code is WaitExit's (128 + SIGKILL when killed here), -1 for a pid that is
// no child of ours (nothing is killed then: the pid may be another's now).
int Reap(pid_t pid, std::chrono::milliseconds timeout, bool* killed = nullptr) {
  if (killed != nullptr) *killed = false;
  if (pid <= 0) return -1;  // waitpid(-1) would reap any child
  StatusOr<int> code = WaitExit(pid, std::max(timeout, std::chrono::milliseconds(0)));
  if (code.ok()) return *code;
  if (code.status().code() != StatusCode::kTimeout) return -1;
  if (killed != nullptr) *killed = true;
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

std::string UniqueToken() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

int64_t MonotonicNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

pid_t ForkChild(const std::function<int()>& fn) {
  std::fflush(nullptr);  // or the child flushes the parent's buffered output again
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = fn();
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return pid;
}

int WaitChild(pid_t pid, std::chrono::milliseconds timeout) {
  bool killed = false;
  const int code = Reap(pid, timeout, &killed);
  return killed ? -1 : code;
}

std::vector<int> WaitAll(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> codes;
  for (pid_t pid : pids) {
    codes.push_back(WaitChild(pid, std::chrono::duration_cast<std::chrono::milliseconds>(
                                       deadline - std::chrono::steady_clock::now())));
  }
  return codes;
}

std::string UniqueGroup(const std::string& base, const std::string& token) {
  // Not from the pid: sandboxed tests run in PID namespaces where they all
  // have the same one, but share /dev/shm.
  static const std::string process_token = UniqueToken().substr(0, 9);
  static std::atomic<int> counter{0};
  return base + "-" + (token.empty() ? process_token : token) + "-" + std::to_string(++counter);
}

std::string BrokerBinary() {
  std::string chosen = GivenBrokerBinary();
  if (const char* other = std::getenv("QR_TEST_BROKER_BIN"); other != nullptr && *other != '\0') {
    chosen = other;
  }
  StatusOr<std::string> found =
      ipc::FindBrokerBinary(ipc::BrokerSearchFromEnvironment(chosen, /*search_path=*/false));
  if (found.ok()) return *found;
  // A test without its broker cannot run; say where it looked.
  std::fprintf(stderr, "%s (give the test --broker=PATH or QR_TEST_BROKER_BIN)\n",
               found.status().ToString().c_str());
  std::abort();
}

void SetBrokerBinary(const std::string& path) { GivenBrokerBinary() = path; }

BrokerProcess::BrokerProcess(std::string binary, std::string socket, std::vector<std::string> args,
                             std::vector<std::string> env)
    : binary_(std::move(binary)),
      socket_(std::move(socket)),
      args_(std::move(args)),
      env_(std::move(env)) {}

BrokerProcess::BrokerProcess(BrokerProcess&& other) noexcept
    : binary_(std::move(other.binary_)),
      socket_(std::move(other.socket_)),
      args_(std::move(other.args_)),
      env_(std::move(other.env_)),
      pid_(std::exchange(other.pid_, -1)) {}

BrokerProcess& BrokerProcess::operator=(BrokerProcess&& other) noexcept {
  if (this != &other) {
    Stop();
    binary_ = std::move(other.binary_);
    socket_ = std::move(other.socket_);
    args_ = std::move(other.args_);
    env_ = std::move(other.env_);
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

BrokerProcess::~BrokerProcess() { Stop(); }

Status BrokerProcess::Start() {
  if (pid_ > 0) return InternalError("the broker at " + socket_ + " is running already");
  std::vector<std::string> argv = {binary_, "--socket", socket_};
  argv.insert(argv.end(), args_.begin(), args_.end());
  StatusOr<pid_t> pid = Spawn(argv, env_);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ipc::QueryStatus(socket_, std::chrono::milliseconds(500)).ok()) {
    if (StatusOr<int> code = WaitExit(pid_, std::chrono::milliseconds(0)); code.ok()) {
      pid_ = -1;
      return UnavailableError("qr-broker " + binary_ + " exited with " + std::to_string(*code) +
                              " at start");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      Signal(SIGKILL);
      return TimeoutError("qr-broker did not answer at " + socket_ + " in 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return OkStatus();
}

int BrokerProcess::Signal(int sig) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  const int code = Reap(pid_, std::chrono::seconds(10));
  pid_ = -1;
  return code;
}

void BrokerProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  Reap(pid_, std::chrono::seconds(5));
  pid_ = -1;
}

}  // namespace qr::testing
