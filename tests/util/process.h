// Child processes for the broker, end-to-end and GPU tests, on top of
// common/subprocess.h (Spawn, WaitExit): forked members for the broker
// tests, bounded waits for children, names that do not collide across tests,
// and the one qr-broker child every test uses.
//
//   BrokerProcess broker(BrokerBinary(), dir + "/broker.sock");
//   ASSERT_OK(broker.Start());          // up once it answers STATUS
//   ... broker.Signal(SIGKILL); ASSERT_OK(broker.Start());   // a restart
#ifndef QR_TESTS_UTIL_PROCESS_H_
#define QR_TESTS_UTIL_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"  // Spawn, WaitExit: tests use them with these

namespace qr::testing {

// Runs fn in a forked child (no exec) that exits with fn's return value; its
// stdout is the test's. Only where no GPU runtime is initialised in this
// process (the broker tests' members, which share the test's pipes and
// sockets); anything else starts a program with Spawn.
pid_t ForkChild(const std::function<int()>& fn);

// Waits for a child (forked or spawned) up to `timeout`: its exit code, or
// 128 + the signal that ended it. One still running at the deadline is
// killed (SIGKILL) and reaped, and -1 returned.
int WaitChild(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(60));
// WaitChild for all, within one deadline; the codes in order.
std::vector<int> WaitAll(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);

// A short random token for names that must not collide with other tests'
// (sandboxed tests share /tmp and /dev/shm, and see the same small pids).
std::string UniqueToken();
// A group name no other test uses and this process uses once:
// `<base>-<token>-<counter>`, the token one UniqueToken of this process's
// unless given (E2eTest gives its per-test one, which its leak check looks
// for in /dev/shm).
std::string UniqueGroup(const std::string& base, const std::string& token = "");

// Monotonic nanoseconds (CLOCK_MONOTONIC is the same clock in every process).
int64_t MonotonicNanos();

// The qr-broker to test: $QR_TEST_BROKER_BIN (to measure another build), else
// the one given to SetBrokerBinary (a test binary's --broker flag), else what
// ipc/broker_binary.h finds without $PATH (the runfile ipc/broker/qr-broker
// under Bazel, the one beside a staged binary). Aborts, saying where it
// looked, when there is none.
std::string BrokerBinary();
void SetBrokerBinary(const std::string& path);

// A qr-broker child serving `socket`: `binary --socket <socket> args...` with
// `env` ("NAME=value") added to this environment. Stopped (SIGTERM, then
// SIGKILL) and reaped on destruction. Move-only; not thread-safe.
class BrokerProcess {
 public:
  BrokerProcess() = default;
  BrokerProcess(std::string binary, std::string socket, std::vector<std::string> args = {},
                std::vector<std::string> env = {});
  BrokerProcess(BrokerProcess&& other) noexcept;
  BrokerProcess& operator=(BrokerProcess&& other) noexcept;
  ~BrokerProcess();

  // Starts it (again, after Signal or Stop) and waits up to 10 s until it
  // answers STATUS. kUnavailable if it exited (e.g. another broker holds
  // the socket), kTimeout if it never answered (it is killed then).
  [[nodiscard]] Status Start();
  // Sends sig and reaps it (SIGKILL after 10 s); returns its exit code, or
  // 128 + the signal that ended it; -1 when it was not running.
  int Signal(int sig);
  // SIGTERM, then SIGKILL after 5 s; idempotent.
  void Stop();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::string& socket() const { return socket_; }

 private:
  std::string binary_;
  std::string socket_;
  std::vector<std::string> args_;  // after --socket PATH
  std::vector<std::string> env_;
  pid_t pid_ = -1;
};

}  // namespace qr::testing

#endif  // QR_TESTS_UTIL_PROCESS_H_
