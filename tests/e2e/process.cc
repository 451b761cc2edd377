#include "tests/e2e/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <thread>
#include <utility>

#include "ipc/broker_client.h"

namespace qr::testing {

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

std::vector<int> WaitAll(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> codes;
  for (pid_t pid : pids) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    StatusOr<int> code = WaitExit(pid, std::max(left, std::chrono::milliseconds(0)));
    if (code.ok()) {
      codes.push_back(*code);
    } else {
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
      codes.push_back(-1);
    }
  }
  return codes;
}

BrokerProcess::BrokerProcess(BrokerProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), socket_(std::move(other.socket_)) {}

BrokerProcess& BrokerProcess::operator=(BrokerProcess&& other) noexcept {
  if (this != &other) {
    Stop();
    pid_ = std::exchange(other.pid_, -1);
    socket_ = std::move(other.socket_);
  }
  return *this;
}

BrokerProcess::~BrokerProcess() { Stop(); }

void BrokerProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (!WaitExit(pid_, std::chrono::seconds(5)).ok()) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

StatusOr<BrokerProcess> BrokerProcess::Start(const std::string& binary, const std::string& socket,
                                             const std::vector<std::string>& env) {
  BrokerProcess b;
  b.socket_ = socket;
  auto pid = Spawn({binary, "--socket", socket}, env);
  if (!pid.ok()) return pid.status();
  b.pid_ = *pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ipc::BrokerConnection::Connect(socket).ok()) {
    if (WaitExit(b.pid_, std::chrono::milliseconds(0)).ok()) {
      b.pid_ = -1;
      return UnavailableError("broker " + binary + " exited at start");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return TimeoutError("broker at " + socket + " did not come up in 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return b;
}

}  // namespace qr::testing
