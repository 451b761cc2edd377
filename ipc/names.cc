#include "ipc/names.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "common/env.h"

namespace qr::ipc {

Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return InvalidArgumentError(std::string(what) + " must be 1 to 63 bytes, got " +
                                std::to_string(name.size()));
  }
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
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

Status ValidateWorldSize(int world_size) {
  if (world_size == 2 || world_size == 4 || world_size == 8) return OkStatus();
  return InvalidArgumentError("world size must be 2, 4 or 8, got " + std::to_string(world_size));
}

Status ValidateRank(int64_t rank, int world_size) {
  if (rank >= 0 && rank < world_size) return OkStatus();
  return InvalidArgumentError("rank " + std::to_string(rank) + " is outside [0, " +
                              std::to_string(world_size) + ")");
}

std::string UserPrefix(uint32_t uid) {
  return "/" + std::string(kSegmentPrefix) + std::to_string(uid) + "-";
}

std::string SegmentName(uint32_t uid, std::string_view group, uint64_t generation) {
  return UserPrefix(uid) + std::string(group) + "-" + std::to_string(generation);
}

std::string DefaultSocketPath() {
  std::string runtime = EnvString({"XDG_RUNTIME_DIR"}, "");
  if (!runtime.empty()) return runtime + "/quickreduce/broker.sock";
  return "/tmp/quickreduce-" + std::to_string(::getuid()) + "/broker.sock";
}

StatusOr<std::string> ResolveSocketPath(std::string_view explicit_path) {
  std::string path(explicit_path);
  if (path.empty()) path = EnvString({"QR_BROKER_SOCKET"}, "");
  if (path.empty()) path = DefaultSocketPath();
  if (path.size() > kMaxSocketPathBytes) {
    return InvalidArgumentError("broker socket path is " + std::to_string(path.size()) +
                                " bytes, the limit is 107: " + path);
  }
  return path;
}

std::string LockPathFor(std::string_view socket_path) { return std::string(socket_path) + ".lock"; }

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
