#include "tests/e2e/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

#include "common/syscall.h"
#include "ipc/broker_client.h"

extern char** environ;

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

StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) return InvalidArgumentError("Spawn: empty argv");
  // Build everything before fork: the child may only exec or _exit.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& add : env) {
      if (add.compare(0, name.size() + 1, name + "=") == 0) overridden = true;
    }
    if (!overridden) env_strings.push_back(std::move(entry));
  }
  for (const std::string& add : env) env_strings.push_back(add);
  std::vector<char*> envp;
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    ::execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  return pid;
}

StatusOr<int> WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (r < 0 && errno != EINTR) return ErrnoToStatus(errno, "waitpid");
    if (std::chrono::steady_clock::now() >= deadline) {
      return TimeoutError("process " + std::to_string(pid) + " still running");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
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
