// Child processes for end-to-end and GPU tests, on top of
// common/subprocess.h (Spawn, WaitExit): waits for several with a kill at the
// deadline, and a broker started for one test and stopped after it.
#ifndef QR_TESTS_E2E_PROCESS_H_
#define QR_TESTS_E2E_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"

namespace qr::testing {

// Waits for all; kills (SIGKILL) and reaps the ones still running at the
// deadline. Returns the exit codes in order (-1 for one killed here).
std::vector<int> WaitAll(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);

// A qr-broker process on its own socket, stopped (SIGTERM, then SIGKILL) and
// reaped on destruction. Move-only.
class BrokerProcess {
 public:
  BrokerProcess() = default;
  BrokerProcess(BrokerProcess&& other) noexcept;
  BrokerProcess& operator=(BrokerProcess&& other) noexcept;
  ~BrokerProcess();

  // Starts `binary --socket <socket>` and waits (up to 10 s) until the socket
  // accepts connections.
  [[nodiscard]] static StatusOr<BrokerProcess> Start(const std::string& binary,
                                                     const std::string& socket,
                                                     const std::vector<std::string>& env = {});
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  void Stop();

 private:
  pid_t pid_ = -1;
  std::string socket_;
};

// A short random token for names that must not collide with other tests'
// (sandboxed tests share /tmp and /dev/shm, and see the same small pids).
std::string UniqueToken();

// Monotonic nanoseconds (CLOCK_MONOTONIC is the same clock in every process).
int64_t MonotonicNanos();

}  // namespace qr::testing

#endif  // QR_TESTS_E2E_PROCESS_H_
