// Names of the runtime objects quickreduce creates, and their validation.
//
// Group names and shm suffixes are [A-Za-z0-9._-]{1,63}. The group segment is
// `/quickreduce-<uid>-<group>-<generation>`; data objects of a group are
// `<segment name>-<suffix>`. Every such name fits kMaxSegmentNameBytes and,
// with a suffix, NAME_MAX, for any uid, group name and generation. The broker socket is $QR_BROKER_SOCKET, else
// $XDG_RUNTIME_DIR/quickreduce/broker.sock, else /tmp/quickreduce-<uid>/broker.sock;
// its lock file is `<socket>.lock`. All functions are thread-safe.
#ifndef QR_IPC_NAMES_H_
#define QR_IPC_NAMES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace qr::ipc {

inline constexpr size_t kMaxNameBytes = 63;
inline constexpr size_t kMaxDeviceIdBytes = 63;
// sun_path is 108 bytes including the NUL.
inline constexpr size_t kMaxSocketPathBytes = 107;
inline constexpr std::string_view kSegmentPrefix = "quickreduce-";
// The longest segment name: "/quickreduce-" + 10-digit uid + "-" + 63-byte
// group + "-" + 20-digit generation is 108 bytes; the rest is room for more
// parts. A data object (`<segment>-<63-byte suffix>`, without the leading
// '/') must fit a file name, NAME_MAX = 255 bytes.
inline constexpr size_t kMaxSegmentNameBytes = 191;
static_assert(kMaxSegmentNameBytes - 1 + 1 + kMaxNameBytes <= 255);

// kInvalidArgument naming `what` unless name matches [A-Za-z0-9._-]{1,63}.
Status ValidateName(std::string_view what, std::string_view name);
// kInvalidArgument unless 1..63 printable ASCII bytes without spaces.
Status ValidateDeviceId(std::string_view device_id);
// kInvalidArgument unless world_size is 2, 4 or 8.
Status ValidateWorldSize(int world_size);
// kInvalidArgument unless 0 <= rank < world_size.
Status ValidateRank(int64_t rank, int world_size);

// kInvalidArgument unless name is '/' followed by 1 to kMaxSegmentNameBytes - 1
// bytes of [A-Za-z0-9._-].
Status ValidateSegmentName(std::string_view name);

// "/quickreduce-<uid>-" : the prefix of every object of this uid.
std::string UserPrefix(uint32_t uid);
// "/quickreduce-<uid>-<group>-<generation>".
std::string SegmentName(uint32_t uid, std::string_view group, uint64_t generation);

// The socket path: `explicit_path` if non-empty, else $QR_BROKER_SOCKET, else
// the default above. kInvalidArgument if it does not fit sun_path.
StatusOr<std::string> ResolveSocketPath(std::string_view explicit_path);
// The default socket path for this user (ignores $QR_BROKER_SOCKET).
std::string DefaultSocketPath();
std::string LockPathFor(std::string_view socket_path);

// True if a process with this pid exists (kill(pid, 0) succeeds or EPERM).
bool ProcessAlive(int32_t pid);

}  // namespace qr::ipc

#endif  // QR_IPC_NAMES_H_
