#include "comm/shm_mapping.h"

#include <fcntl.h>
#include "common/logging.h"
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/shm_object.h"
#include "common/status_macros.h"
#include "common/syscall.h"
#include "common/unique_fd.h"

namespace qr {
namespace {

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

ShmMapping::ShmMapping(ShmMapping&& other) noexcept
    : name_(std::move(other.name_)),
      base_(std::exchange(other.base_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

ShmMapping& ShmMapping::operator=(ShmMapping&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
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
  base_ = nullptr;
  bytes_ = 0;
  owner_ = false;
}

StatusOr<ShmMapping> ShmMapping::Create(std::string_view name, size_t bytes) {
  QR_RETURN_IF_ERROR(CheckName(name));
  std::string n(name);
  QR_ASSIGN_OR_RETURN(int raw, SysCall("shm_open " + n, [&] {
                        return ::shm_open(n.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                                          S_IRUSR | S_IWUSR);
                      }));
  UniqueFd fd(raw);
  // From here on the name is ours: unlink it if anything below fails.
  ShmMapping unlinker(n, nullptr, 0, /*owner=*/true);
  // fchmod: the umask could have taken bits off, never added; be explicit.
  QR_SYS_RETURN_IF_ERROR(::fchmod(fd.get(), S_IRUSR | S_IWUSR));
  // Reserved, not just sized: tmpfs allocates on first touch, and a full
  // /dev/shm would then kill us with SIGBUS instead of failing here.
  QR_RETURN_IF_ERROR(ReserveShm(fd.get(), n, bytes));
  QR_ASSIGN_OR_RETURN(void* base, MapShared(fd.get(), bytes, n));
  unlinker.owner_ = false;
  return ShmMapping(std::move(n), base, bytes, /*owner=*/true);
}

StatusOr<ShmMapping> ShmMapping::Open(std::string_view name, size_t bytes) {
  QR_RETURN_IF_ERROR(CheckName(name));
  std::string n(name);
  QR_ASSIGN_OR_RETURN(int raw, SysCall("shm_open " + n, [&] {
                        return ::shm_open(n.c_str(), O_RDWR | O_CLOEXEC, 0);
                      }));
  UniqueFd fd(raw);
  // Ours, 0600 and large enough before it is mapped: a short object would
  // fault (SIGBUS) on the first access past its end.
  QR_RETURN_IF_ERROR(CheckTrustedShm(fd.get(), n, bytes, /*exact=*/false));
  QR_ASSIGN_OR_RETURN(void* base, MapShared(fd.get(), bytes, n));
  return ShmMapping(std::move(n), base, bytes, /*owner=*/false);
}

}  // namespace qr
