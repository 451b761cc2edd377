// Names of the runtime objects quickreduce creates, and their validation.
//
// Group names and shm suffixes are [A-Za-z0-9._-]{1,63}. The group segment is
// `/quickreduce-<uid>-<group>-<generation>-<nonce>`, the nonce 16 lowercase hex
// digits from getrandom: another user who can write /dev/shm cannot guess a
// name to squat it or to plant a segment for us. Data objects of a group are
// `<segment name>-<suffix>`. The longest segment name (63-byte group, 10-digit
// uid, 20-digit generation) is kMaxSegmentNameBytes = 125 bytes, and with a
// 63-byte suffix a data object stays at 189, well inside NAME_MAX (255 bytes
// for the file in /dev/shm, slash excluded): every valid group name works at
// every generation. The broker socket is $QR_BROKER_SOCKET, else
// $XDG_RUNTIME_DIR/quickreduce/broker.sock, else /tmp/quickreduce-<uid>/broker.sock;
// its lock file is `<socket>.lock`. All functions are thread-safe.
#ifndef QR_IPC_NAMES_H_
#define QR_IPC_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace qr::ipc {

inline constexpr size_t kMaxNameBytes = 63;
inline constexpr size_t kMaxDeviceIdBytes = 63;
// sun_path is 108 bytes including the NUL.
inline constexpr size_t kMaxSocketPathBytes = 107;
inline constexpr std::string_view kSegmentPrefix = "quickreduce-";
inline constexpr size_t kNonceHexDigits = 16;
// "/quickreduce-" + uid + "-" + group + "-" + generation + "-" + nonce, at most.
inline constexpr size_t kMaxSegmentNameBytes = 1 + 12 + 10 + 1 + 63 + 1 + 20 + 1 + kNonceHexDigits;
// What shm_open accepts: "/" + NAME_MAX bytes.
inline constexpr size_t kMaxShmNameBytes = 1 + 255;

// kInvalidArgument naming `what` unless name matches [A-Za-z0-9._-]{1,63}.
Status ValidateName(std::string_view what, std::string_view name);
// kInvalidArgument unless 1..63 printable ASCII bytes without spaces.
Status ValidateDeviceId(std::string_view device_id);
// kInvalidArgument unless 0 <= rank < world_size.
Status ValidateRank(int64_t rank, int world_size);

// "/quickreduce-<uid>-" : the prefix of every object of this uid.
std::string UserPrefix(uint32_t uid);
// "/quickreduce-<uid>-<group>-<generation>-<nonce as 16 hex digits>".
std::string SegmentName(uint32_t uid, std::string_view group, uint64_t generation, uint64_t nonce);
// 64 unpredictable bits (getrandom). kUnavailable if the kernel has none.
StatusOr<uint64_t> RandomNonce();

struct SegmentNameParts {
  uint32_t uid = 0;
  std::string group;
  uint64_t generation = 0;
  uint64_t nonce = 0;
};
// The inverse of SegmentName; nullopt for any name it cannot have made
// (parsed from the right: group names may contain '-' and digits).
std::optional<SegmentNameParts> ParseSegmentName(std::string_view name);
// kInvalidArgument unless name is "/" + 1..255 bytes of [A-Za-z0-9._-]: any
// segment or data object name a broker or member of this build can make.
Status ValidateShmName(std::string_view name);

// The socket path: `explicit_path` if non-empty, else $QR_BROKER_SOCKET, else
// the default above. kInvalidArgument if it does not fit sun_path.
StatusOr<std::string> ResolveSocketPath(std::string_view explicit_path);
// The default socket path for this user (ignores $QR_BROKER_SOCKET).
std::string DefaultSocketPath();
std::string LockPathFor(std::string_view socket_path);
// The directory a socket path lives in: "." for "broker.sock", "/" for
// "/broker.sock" (never the socket path itself).
std::string SocketDirectory(std::string_view socket_path);

// The runtime directory of a socket, as the broker, the client, autostart and
// qrctl all check it before using a path in it. With `create`, a missing
// directory is made 0700. The default directory (DefaultSocketPath, e.g.
// /tmp/quickreduce-<uid>, where any user could have made it first) must then
// be a real directory (lstat: no symlink is followed) owned by us; a looser
// mode is tightened to 0700 through an O_NOFOLLOW descriptor. kUnavailable
// otherwise, saying what to do (set XDG_RUNTIME_DIR or QR_BROKER_SOCKET).
// Other directories (an explicit QR_BROKER_SOCKET such as /tmp/x.sock) are the
// user's choice and only created; the broker's SO_PEERCRED check and the
// client's (BrokerConnection) protect those. A missing directory without
// `create` is OK (nothing listens there).
[[nodiscard]] Status CheckRuntimeDirectory(const std::string& socket_path, bool create);

// True if a process with this pid exists (kill(pid, 0) succeeds or EPERM).
bool ProcessAlive(int32_t pid);

}  // namespace qr::ipc

#endif  // QR_IPC_NAMES_H_
