// Child processes by fork+exec (never a bare fork: a process that has
// initialised a GPU runtime must not run on in a forked copy) and bounded
// waits for their exit. Used by qr-demo and the end-to-end tests.
#ifndef QR_COMMON_SUBPROCESS_H_
#define QR_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace qr {

// fork+execve(argv[0], argv) with `env` ("NAME=value") added to, or
// replacing entries of, this environment. Returns the child's pid;
// kInvalidArgument for an empty argv, kUnavailable/kInternal if fork fails.
// A child that cannot exec exits with 127.
[[nodiscard]] StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env = {});

// Waits for `pid` to exit within `timeout`; returns its exit code (128+signal
// when killed). kTimeout if still running (the child is left alone).
[[nodiscard]] StatusOr<int> WaitExit(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace qr

#endif  // QR_COMMON_SUBPROCESS_H_
