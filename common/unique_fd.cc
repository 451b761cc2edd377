#include "common/unique_fd.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace qr {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) {
    // close() is not retried on EINTR: on Linux the descriptor is gone anyway.
    if (::close(fd_) != 0 && errno != EINTR) {
      std::fprintf(stderr, "quickreduce: close(%d): %s\n", fd_, std::strerror(errno));
    }
  }
  fd_ = fd;
}

}  // namespace qr
