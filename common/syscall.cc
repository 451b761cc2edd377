#include "common/syscall.h"

#include <limits.h>
#include <unistd.h>

#include <cstring>

namespace qr {

std::string SelfExecutablePath() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

Status ErrnoToStatus(int err, std::string_view what) {
  std::string message = std::string(what) + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ECONNREFUSED:
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EAGAIN:
      return UnavailableError(std::move(message));
    case EEXIST:
      return AlreadyExistsError(std::move(message));
    case EINVAL:
    case ENAMETOOLONG:
      return InvalidArgumentError(std::move(message));
    case ETIMEDOUT:
      return TimeoutError(std::move(message));
    case EPIPE:
    case ECONNRESET:
      return PeerFailedError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

}  // namespace qr
