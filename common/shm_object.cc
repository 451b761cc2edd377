#include "common/shm_object.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "common/syscall.h"

namespace qr {
namespace {

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string MiB(size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20); }

}  // namespace

bool TrustedShmStat(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 07777) == 0600;
}

Status CheckTrustedShm(int fd, std::string_view name, size_t min_bytes, bool exact,
                       size_t* size_out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoToStatus(errno, "fstat " + std::string(name));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return UnavailableError("refusing shared memory " + std::string(name) + ": it belongs to uid " +
                            std::to_string(st.st_uid) + ", not to us (uid " +
                            std::to_string(::geteuid()) +
                            "); another user may have planted it");
  }
  if ((st.st_mode & 07777) != 0600) {
    return UnavailableError("refusing shared memory " + std::string(name) + ": mode " +
                            Mode(st.st_mode) +
                            ", expected 0600 (others could read or change it)");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size < min_bytes || (exact && size != min_bytes)) {
    return UnavailableError("refusing shared memory " + std::string(name) + ": it holds " +
                            std::to_string(size) + " bytes, expected " +
                            (exact ? "" : "at least ") + std::to_string(min_bytes) +
                            " (truncated or not ours)");
  }
  if (size_out != nullptr) *size_out = size;
  return OkStatus();
}

size_t ShmFreeBytes() {
  struct statvfs vfs {};
  if (::statvfs(kShmDir, &vfs) != 0) return 0;
  return static_cast<size_t>(vfs.f_bavail) * static_cast<size_t>(vfs.f_frsize);
}

Status ReserveShm(int fd, std::string_view name, size_t bytes) {
  if (bytes == 0) return OkStatus();
  // posix_fallocate returns the error instead of setting errno.
  int err;
  do {
    err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (err == EINTR);
  if (err == 0) return OkStatus();
  if (err == ENOSPC || err == EFBIG || err == ENOMEM) {
    // tmpfs undoes a failed fallocate; the caller unlinks the object.
    return UnavailableError("not enough shared memory: need " + MiB(bytes) + " MiB in " + kShmDir +
                            ", " + std::to_string(ShmFreeBytes() >> 20) + " MiB free (for " +
                            std::string(name) +
                            "; enlarge /dev/shm, e.g. docker run --shm-size)");
  }
  return ErrnoToStatus(err, "posix_fallocate " + std::string(name));
}

}  // namespace qr
