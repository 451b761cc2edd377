#include "ipc/names.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "common/env.h"
#include "common/env_vars.h"
#include "common/status_macros.h"
#include "common/syscall.h"
#include "common/unique_fd.h"

namespace qr::ipc {

namespace {

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Decimal without sign or leading zeros, fitting uint64_t.
std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

}  // namespace

Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return InvalidArgumentError(std::string(what) + " must be 1 to 63 bytes, got " +
                                std::to_string(name.size()));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return InvalidArgumentError(std::string(what) + " '" + std::string(name) +
                                  "' has characters outside [A-Za-z0-9._-]");
    }
  }
  return OkStatus();
}

Status ValidateSegmentName(std::string_view name) {
  if (name.size() < 2 || name.size() > kMaxSegmentNameBytes || name[0] != '/') {
    return InvalidArgumentError("segment name must be '/' and 1 to " +
                                std::to_string(kMaxSegmentNameBytes - 1) + " bytes, got " +
                                std::to_string(name.size()) + " bytes");
  }
  for (char c : name.substr(1)) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return InvalidArgumentError("segment name has characters outside [A-Za-z0-9._-]");
  }
  return OkStatus();
}

Status ValidateDeviceId(std::string_view device_id) {
  if (device_id.empty() || device_id.size() > kMaxDeviceIdBytes) {
    return InvalidArgumentError("device id must be 1 to 63 bytes, got " +
                                std::to_string(device_id.size()));
  }
  for (char c : device_id) {
    if (c <= ' ' || c > '~') return InvalidArgumentError("device id has non-printable bytes");
  }
  return OkStatus();
}

Status ValidateRank(int64_t rank, int world_size) {
  if (rank >= 0 && rank < world_size) return OkStatus();
  return InvalidArgumentError("rank " + std::to_string(rank) + " is outside [0, " +
                              std::to_string(world_size) + ")");
}

std::string UserPrefix(uint32_t uid) {
  return "/" + std::string(kSegmentPrefix) + std::to_string(uid) + "-";
}

std::string SegmentName(uint32_t uid, std::string_view group, uint64_t generation, uint64_t nonce) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(kNonceHexDigits, '0');
  for (size_t i = 0; i < kNonceHexDigits; ++i) {
    hex[kNonceHexDigits - 1 - i] = kHex[(nonce >> (4 * i)) & 0xf];
  }
  return UserPrefix(uid) + std::string(group) + "-" + std::to_string(generation) + "-" + hex;
}

StatusOr<uint64_t> RandomNonce() {
  uint64_t v = 0;
  QR_ASSIGN_OR_RETURN(ssize_t n,
                      SysCall("getrandom", [&] { return ::getrandom(&v, sizeof(v), 0); }));
  if (n != static_cast<ssize_t>(sizeof(v)))
    return UnavailableError("getrandom returned too few bytes");
  return v;
}

std::optional<SegmentNameParts> ParseSegmentName(std::string_view name) {
  std::string_view head = "/";
  if (name.substr(0, 1) != head || name.substr(1, kSegmentPrefix.size()) != kSegmentPrefix) {
    return std::nullopt;
  }
  std::string_view rest = name.substr(1 + kSegmentPrefix.size());
  size_t uid_end = rest.find('-');
  if (uid_end == std::string_view::npos) return std::nullopt;
  auto uid = ParseDecimal(rest.substr(0, uid_end));
  if (!uid.has_value() || *uid > UINT32_MAX) return std::nullopt;
  rest = rest.substr(uid_end + 1);
  if (rest.size() < kNonceHexDigits + 1 || rest[rest.size() - kNonceHexDigits - 1] != '-') {
    return std::nullopt;
  }
  std::string_view hex = rest.substr(rest.size() - kNonceHexDigits);
  uint64_t nonce = 0;
  for (char c : hex) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    nonce = nonce << 4 | static_cast<uint64_t>(d);
  }
  rest = rest.substr(0, rest.size() - kNonceHexDigits - 1);
  size_t gen_start = rest.rfind('-');
  if (gen_start == std::string_view::npos) return std::nullopt;
  auto generation = ParseDecimal(rest.substr(gen_start + 1));
  std::string_view group = rest.substr(0, gen_start);
  if (!generation.has_value() || !ValidateName("group", group).ok()) return std::nullopt;
  SegmentNameParts parts;
  parts.uid = static_cast<uint32_t>(*uid);
  parts.group = std::string(group);
  parts.generation = *generation;
  parts.nonce = nonce;
  return parts;
}

Status ValidateShmName(std::string_view name) {
  if (name.size() < 2 || name.size() > kMaxShmNameBytes || name[0] != '/') {
    return InvalidArgumentError("shared-memory name must be '/' and 1 to 255 bytes, got " +
                                std::to_string(name.size()) + " bytes");
  }
  for (char c : name.substr(1)) {
    if (!IsNameChar(c)) {
      return InvalidArgumentError("shared-memory name has characters outside [A-Za-z0-9._-]");
    }
  }
  return OkStatus();
}

std::string DefaultSocketPath() {
  std::string runtime = EnvString({"XDG_RUNTIME_DIR"}, "");
  if (!runtime.empty()) return runtime + "/quickreduce/broker.sock";
  return "/tmp/quickreduce-" + std::to_string(::getuid()) + "/broker.sock";
}

StatusOr<std::string> ResolveSocketPath(std::string_view explicit_path) {
  std::string path(explicit_path);
  if (path.empty()) path = kEnvBrokerSocket.String();
  if (path.empty()) path = DefaultSocketPath();
  if (path.size() > kMaxSocketPathBytes) {
    return InvalidArgumentError("broker socket path is " + std::to_string(path.size()) +
                                " bytes, the limit is 107: " + path);
  }
  return path;
}

std::string LockPathFor(std::string_view socket_path) { return std::string(socket_path) + ".lock"; }

std::string SocketDirectory(std::string_view socket_path) {
  size_t slash = socket_path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(socket_path.substr(0, slash));
}

Status CheckRuntimeDirectory(const std::string& socket_path, bool create) {
  const std::string dir = SocketDirectory(socket_path);
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, "mkdir " + dir);
  }
  if (SocketDirectory(DefaultSocketPath()) != dir) return OkStatus();
  const std::string advice =
      "; set XDG_RUNTIME_DIR to a private directory (e.g. /run/user/" +
      std::to_string(::geteuid()) +
      ") or QR_BROKER_SOCKET to a socket path in a directory only you can write";
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT && !create) return OkStatus();
    return ErrnoToStatus(errno, "lstat " + dir);
  }
  if (S_ISLNK(st.st_mode)) {
    return UnavailableError("the broker directory " + dir +
                            " is a symbolic link; refusing to follow it (another user may have "
                            "planted it)" +
                            advice);
  }
  if (!S_ISDIR(st.st_mode)) {
    return UnavailableError("the broker directory " + dir + " is not a directory" + advice);
  }
  if (st.st_uid != ::geteuid()) {
    return UnavailableError("the broker directory " + dir + " belongs to uid " +
                            std::to_string(st.st_uid) + ", not to us (uid " +
                            std::to_string(::geteuid()) +
                            "): another user may be impersonating the broker" + advice);
  }
  if ((st.st_mode & 07777) != 0700) {
    // Through a descriptor of the directory itself: a path could be swapped
    // for a link between the lstat and a chmod.
    int raw = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) return ErrnoToStatus(errno, "open " + dir);
    UniqueFd fd(raw);
    struct stat again {};
    if (::fstat(fd.get(), &again) != 0) return ErrnoToStatus(errno, "fstat " + dir);
    if (again.st_uid != ::geteuid() || again.st_ino != st.st_ino) {
      return UnavailableError("the broker directory " + dir + " changed while it was checked" +
                              advice);
    }
    if (::fchmod(fd.get(), 0700) != 0) return ErrnoToStatus(errno, "chmod 0700 " + dir);
  }
  return OkStatus();
}

bool ProcessAlive(int32_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  // A zombie has exited: its shm users are gone even if nobody reaped it.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace qr::ipc
