#include "common/shm_object.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "common/logging.h"
#include "common/status_macros.h"
#include "common/syscall.h"

namespace qr {
namespace {

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string MiB(size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20); }

Status CheckName(std::string_view name) {
  if (name.size() < 2 || name.size() > 250 || name[0] != '/' ||
      name.find('/', 1) != std::string_view::npos) {
    return InvalidArgumentError("bad shared-memory name '" + std::string(name) + "'");
  }
  return OkStatus();
}

StatusOr<void*> MapShared(int fd, size_t bytes, std::string_view name) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return ErrnoToStatus(errno, "mmap " + std::string(name));
  return base;
}

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
                            std::to_string(::geteuid()) + "); another user may have planted it");
  }
  if ((st.st_mode & 07777) != 0600) {
    return UnavailableError("refusing shared memory " + std::string(name) + ": mode " +
                            Mode(st.st_mode) + ", expected 0600 (others could read or change it)");
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
                            std::string(name) + "; enlarge /dev/shm, e.g. docker run --shm-size)");
  }
  return ErrnoToStatus(err, "posix_fallocate " + std::string(name));
}

ShmMapping::ShmMapping(std::string name, UniqueFd fd, void* base, size_t bytes, bool owner)
    : name_(std::move(name)), fd_(std::move(fd)), base_(base), bytes_(bytes), owner_(owner) {}

ShmMapping::ShmMapping(ShmMapping&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::move(other.fd_)),
      base_(std::exchange(other.base_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

ShmMapping& ShmMapping::operator=(ShmMapping&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

ShmMapping::~ShmMapping() { Reset(); }

void ShmMapping::Reset() {
  if (base_ != nullptr && ::munmap(base_, bytes_) != 0) {
    Log().warn("munmap {}: {}", name_, std::strerror(errno));
  }
  if (owner_ && ::shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    Log().warn("shm_unlink {}: {}", name_, std::strerror(errno));
  }
  fd_.reset();
  base_ = nullptr;
  bytes_ = 0;
  owner_ = false;
}

StatusOr<ShmMapping> ShmMapping::Create(std::string_view name, size_t bytes) {
  QR_RETURN_IF_ERROR(CheckName(name));
  std::string n(name);
  QR_ASSIGN_OR_RETURN(int raw, SysCall("creating shared memory " + n, [&] {
                        return ::shm_open(n.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                                          S_IRUSR | S_IWUSR);
                      }));
  // From here on the name is ours: unlinked if anything below fails.
  ShmMapping m(n, UniqueFd(raw), nullptr, 0, /*owner=*/true);
  // fchmod: the umask could have taken bits off, never added; be explicit.
  QR_SYS_RETURN_IF_ERROR(::fchmod(m.fd(), S_IRUSR | S_IWUSR));
  // Reserved, not just sized: tmpfs allocates on first touch, and a full
  // /dev/shm would then kill us with SIGBUS instead of failing here.
  QR_RETURN_IF_ERROR(ReserveShm(m.fd(), n, bytes));
  QR_ASSIGN_OR_RETURN(m.base_, MapShared(m.fd(), bytes, n));
  m.bytes_ = bytes;
  return m;
}

StatusOr<ShmMapping> ShmMapping::OpenChecked(std::string_view name, size_t min_bytes, bool whole) {
  QR_RETURN_IF_ERROR(CheckName(name));
  std::string n(name);
  // glibc's shm_open adds O_NOFOLLOW.
  QR_ASSIGN_OR_RETURN(int raw, SysCall("opening shared memory " + n, [&] {
                        return ::shm_open(n.c_str(), O_RDWR | O_CLOEXEC, 0);
                      }));
  UniqueFd fd(raw);
  // Ours, 0600 and large enough before it is mapped: a short object would
  // fault (SIGBUS) on the first access past its end.
  size_t size = 0;
  QR_RETURN_IF_ERROR(CheckTrustedShm(fd.get(), n, min_bytes, /*exact=*/false, &size));
  const size_t bytes = whole ? size : min_bytes;
  QR_ASSIGN_OR_RETURN(void* base, MapShared(fd.get(), bytes, n));
  return ShmMapping(std::move(n), std::move(fd), base, bytes, /*owner=*/false);
}

StatusOr<ShmMapping> ShmMapping::Open(std::string_view name, size_t bytes) {
  return OpenChecked(name, bytes, /*whole=*/false);
}

StatusOr<ShmMapping> ShmMapping::OpenWhole(std::string_view name, size_t min_bytes) {
  return OpenChecked(name, min_bytes, /*whole=*/true);
}

}  // namespace qr
