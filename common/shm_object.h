// POSIX shared-memory objects: ShmMapping, the one wrapper quickreduce maps
// them with (the group segment, ipc/segment.h, and the host backend's
// buffers), and the checks it makes.
//
// /dev/shm is world-writable: any local user can create an object under a
// name we are about to open, or map and truncate one of ours. Before using an
// object, check that it is ours (CheckTrustedShm); reserve an object's pages
// when sizing it (ReserveShm), since tmpfs allocates on first touch and a
// full /dev/shm then kills the toucher with SIGBUS.
//
// Raw POSIX rather than Boost.Interprocess: the checks need the descriptor
// (fstat before mmap), the group segment's liveness locks need it too
// (F_OFD_SETLK), reservation needs posix_fallocate, and errors are Statuses
// (Boost throws); none of that is Boost's.
#ifndef QR_COMMON_SHM_OBJECT_H_
#define QR_COMMON_SHM_OBJECT_H_

#include <sys/stat.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace qr {

inline constexpr const char* kShmDir = "/dev/shm";

// True for a regular file owned by our effective uid with mode exactly 0600:
// the only objects quickreduce creates and the only ones it trusts.
bool TrustedShmStat(const struct stat& st);

// fstat(fd) of the object `name`: kUnavailable unless TrustedShmStat and the
// size is at least min_bytes (exactly min_bytes if `exact`). The message
// names the owner, mode or size found. *size_out (if not null) gets the size.
[[nodiscard]] Status CheckTrustedShm(int fd, std::string_view name, size_t min_bytes, bool exact,
                                     size_t* size_out = nullptr);

// Sizes the object to `bytes` with every page allocated (posix_fallocate), so
// touching it can never raise SIGBUS for want of space. kUnavailable "not
// enough shared memory: need N MiB in /dev/shm, M free" when it does not fit.
[[nodiscard]] Status ReserveShm(int fd, std::string_view name, size_t bytes);

// Free bytes in /dev/shm (statvfs; 0 if it cannot be read).
size_t ShmFreeBytes();

// A move-only POSIX shared-memory object mapped read-write into this
// process, with its descriptor kept open (for record locks). The object that
// created the name owns it and unlinks it on destruction, unless it Disown()s
// it; objects that only opened it only unmap. Not thread-safe; the mapping
// itself may be shared by any number of threads and processes.
class ShmMapping {
 public:
  ShmMapping() = default;
  ShmMapping(ShmMapping&& other) noexcept;
  ShmMapping& operator=(ShmMapping&& other) noexcept;
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;
  ~ShmMapping();  // unmaps; unlinks the name if this object owns it

  // Creates `name` ("/..." as shm_open wants) exclusively with mode 0600,
  // its `bytes` reserved (posix_fallocate; zero-filled) and mapped
  // read-write. Returns kAlreadyExists if the name is taken, kInvalidArgument
  // for a bad name, kUnavailable "not enough shared memory: need N MiB in
  // /dev/shm, M free" when it does not fit. On failure the name is removed.
  [[nodiscard]] static StatusOr<ShmMapping> Create(std::string_view name, size_t bytes);
  // Maps the first `bytes` of an existing object read-write. kUnavailable if
  // it does not exist, is not ours with mode 0600, or holds fewer than
  // `bytes` (checked before mapping). A truncate by its owner after mapping
  // still faults the mapper with SIGBUS on the next access: POSIX offers no
  // way to prevent it, and only the same uid can do it.
  [[nodiscard]] static StatusOr<ShmMapping> Open(std::string_view name, size_t bytes);
  // As Open, but maps the whole object, which must hold at least min_bytes;
  // size() says how much that is.
  [[nodiscard]] static StatusOr<ShmMapping> OpenWhole(std::string_view name, size_t min_bytes);

  void* data() const { return base_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }
  int fd() const { return fd_.get(); }
  bool owner() const { return owner_; }
  bool valid() const { return base_ != nullptr; }

  // The name is no longer unlinked on destruction (its removal is explicit
  // elsewhere).
  void Disown() { owner_ = false; }
  // Unmaps, closes (and unlinks if owner) now; idempotent.
  void Reset();

 private:
  ShmMapping(std::string name, UniqueFd fd, void* base, size_t bytes, bool owner);
  static StatusOr<ShmMapping> OpenChecked(std::string_view name, size_t min_bytes, bool whole);

  std::string name_;
  UniqueFd fd_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
};

}  // namespace qr

#endif  // QR_COMMON_SHM_OBJECT_H_
