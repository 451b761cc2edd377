// EINTR-safe system calls that report failures as Status.
//
//   QR_ASSIGN_OR_RETURN(int fd, SysCall("open", [&] { return ::open(p, O_RDONLY); }));
//   QR_SYS_RETURN_IF_ERROR(::ftruncate(fd, size));
#ifndef QR_COMMON_SYSCALL_H_
#define QR_COMMON_SYSCALL_H_

#include <cerrno>
#include <string>
#include <string_view>

#include "common/status.h"

namespace qr {

// Runs fn() again while it fails with EINTR; returns its last result. errno
// is that of the last attempt.
template <typename Fn>
auto RetryOnEintr(Fn&& fn) -> decltype(fn()) {
  decltype(fn()) rc;
  do {
    rc = fn();
  } while (rc == -1 && errno == EINTR);
  return rc;
}

// A Status for a failed syscall: "<what>: <strerror(err)>". ENOENT/ECONNREFUSED
// map to kUnavailable, EEXIST to kAlreadyExists, EINVAL to kInvalidArgument,
// ENOSPC/ENOMEM/EMFILE/ENFILE to kUnavailable, ETIMEDOUT to kTimeout, the rest
// to kInternal.
Status ErrnoToStatus(int err, std::string_view what);

// The running executable's absolute path (/proc/self/exe); "" if it cannot
// be read.
std::string SelfExecutablePath();

// Runs fn() with EINTR retries; -1 becomes ErrnoToStatus(errno, name).
template <typename Fn>
StatusOr<decltype(std::declval<Fn>()())> SysCall(std::string_view name, Fn&& fn) {
  auto rc = RetryOnEintr(fn);
  if (rc == -1) return ErrnoToStatus(errno, name);
  return rc;
}

}  // namespace qr

// Evaluates a syscall expression with EINTR retries; returns a Status naming
// the call and strerror(errno) if it yields -1.
#define QR_SYS_RETURN_IF_ERROR(call)                      \
  do {                                                    \
    if (::qr::RetryOnEintr([&] { return (call); }) == -1) \
      return ::qr::ErrnoToStatus(errno, #call);           \
  } while (0)

#endif  // QR_COMMON_SYSCALL_H_
