// Trust checks and space reservation for POSIX shared-memory objects.
//
// /dev/shm is world-writable: any local user can create an object under a
// name we are about to open, or map and truncate one of ours. Before using an
// object, check that it is ours (CheckTrustedShm); reserve an object's pages
// when sizing it (ReserveShm), since tmpfs allocates on first touch and a
// full /dev/shm then kills the toucher with SIGBUS.
#ifndef QR_COMMON_SHM_OBJECT_H_
#define QR_COMMON_SHM_OBJECT_H_

#include <sys/stat.h>

#include <cstddef>
#include <string_view>

#include "common/status.h"

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

}  // namespace qr

#endif  // QR_COMMON_SHM_OBJECT_H_
