#include "ipc/gc.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/shm_object.h"
#include "common/syscall.h"
#include "common/unique_fd.h"
#include "ipc/names.h"
#include "ipc/segment.h"

namespace qr::ipc {
namespace {

bool OlderThan(const std::string& name, std::chrono::seconds age) {
  struct stat st {};
  std::string path = std::string(kShmDir) + name;
  if (::stat(path.c_str(), &st) != 0) return false;
  return ::time(nullptr) - st.st_mtime >= age.count();
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The segment (among `segments`) that owns data object `obj`: the longest
// segment name that is followed by '-' in obj.
const std::string* OwnerOf(const std::string& obj, const std::vector<std::string>& segments) {
  const std::string* best = nullptr;
  for (const std::string& seg : segments) {
    if (obj.size() > seg.size() + 1 && StartsWith(obj, seg) && obj[seg.size()] == '-' &&
        (best == nullptr || seg.size() > best->size())) {
      best = &seg;
    }
  }
  return best;
}

// Names ("/...") of shm objects starting with prefix ("/..."), sorted: ours
// (TrustedShmStat) or, with `foreign`, those that are not. /dev/shm is
// world-writable: another user's file under our prefix is never ours to
// open, adopt or remove.
std::vector<std::string> ListWithPrefix(const std::string& slash_prefix, bool foreign = false) {
  std::vector<std::string> out;
  std::string prefix = slash_prefix.substr(1);
  DIR* dir = ::opendir(kShmDir);
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    if (!StartsWith(e->d_name, prefix)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (TrustedShmStat(st) != foreign) out.push_back("/" + std::string(e->d_name));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> ListUserObjects(uint32_t uid) { return ListWithPrefix(UserPrefix(uid)); }

namespace {

enum class Kind { kSegment, kOtherVersion, kData, kGone, kForeign, kUnreadable };

struct Examined {
  Kind kind = Kind::kData;
  uint32_t version = 0;
  bool locked = false;  // someone holds a record lock on it
  uint32_t owner = 0;
  std::string error;
};

// What an object is, read without mapping it: its owner, its first 16 bytes
// (segment magic and layout version) and whether any record lock is held on
// it (F_OFD_GETLK over the whole file finds the broker's and every member's).
Examined Examine(const std::string& name, uint32_t uid) {
  Examined e;
  std::string path = std::string(kShmDir) + name;
  int raw = RetryOnEintr(
      [&] { return ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); });
  if (raw < 0) {
    if (errno == ENOENT) {
      e.kind = Kind::kGone;
    } else {
      e.kind = Kind::kUnreadable;
      e.error = std::string("cannot open: ") + std::strerror(errno);
    }
    return e;
  }
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    e.kind = Kind::kUnreadable;
    e.error = std::string("fstat: ") + std::strerror(errno);
    return e;
  }
  e.owner = st.st_uid;
  // What we made ourselves is ours to sweep too (root sweeping --uid N).
  if ((st.st_uid != uid && st.st_uid != ::geteuid()) || !S_ISREG(st.st_mode)) {
    e.kind = Kind::kForeign;
    return e;
  }
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;  // the whole file
  if (RetryOnEintr([&] { return ::fcntl(fd.get(), F_OFD_GETLK, &fl); }) != 0) {
    e.kind = Kind::kUnreadable;
    e.error = std::string("F_OFD_GETLK: ") + std::strerror(errno);
    return e;
  }
  e.locked = fl.l_type != F_UNLCK;
  uint8_t head[16] = {};
  ssize_t n = RetryOnEintr([&] { return ::pread(fd.get(), head, sizeof(head), 0); });
  uint64_t magic = 0;
  if (n >= 12) {
    std::memcpy(&magic, head, 8);
    std::memcpy(&e.version, head + 8, 4);
  }
  if (magic != kSegmentMagic) {
    e.kind = Kind::kData;
  } else {
    e.kind = e.version == kGroupSegmentLayoutVersion ? Kind::kSegment : Kind::kOtherVersion;
  }
  return e;
}

}  // namespace

std::vector<std::string> ListForeignObjects(uint32_t uid) {
  return ListWithPrefix(UserPrefix(uid), /*foreign=*/true);
}

SweepResult SweepStale(uint32_t uid, bool dry_run, const std::set<std::string>& keep) {
  SweepResult result;
  std::vector<std::string> objects = ListUserObjects(uid);
  // Every name that may own data objects: data whose owner is in doubt stays,
  // including the data of an object that is not ours to examine.
  std::vector<std::string> owners = ListForeignObjects(uid), stale_segments, data;
  for (const std::string& name : objects) {
    Examined e = Examine(name, uid);
    switch (e.kind) {
      case Kind::kGone:
        break;
      case Kind::kForeign:
        result.foreign.push_back(name + " (uid " + std::to_string(e.owner) + ")");
        break;
      case Kind::kUnreadable:
        owners.push_back(name);
        result.errors.push_back(name + ": " + e.error + "; left alone");
        break;
      case Kind::kOtherVersion:
        owners.push_back(name);
        result.unknown.push_back(name + " (layout version " + std::to_string(e.version) + ", " +
                                 (e.locked ? "in use" : "not in use") + ")");
        break;
      case Kind::kSegment:
        owners.push_back(name);
        if (keep.count(name) != 0 || e.locked) {
          result.live_segments.push_back(name);
        } else {
          stale_segments.push_back(name);
        }
        break;
      case Kind::kData:
        data.push_back(name);
        break;
    }
  }
  auto remove = [&](const std::string& name) {
    if (!dry_run) {
      Status s = GroupSegment::Remove(name);
      if (!s.ok()) {
        result.errors.push_back(name + ": " + s.message());
        return;
      }
    }
    result.removed.push_back(name);
  };
  for (const std::string& seg : stale_segments) remove(seg);
  for (const std::string& obj : data) {
    const std::string* owner = OwnerOf(obj, owners);
    if (owner == nullptr) {
      // Not a segment and owned by none: an orphan, unless it is young enough
      // to be a segment or data object being created right now.
      if (OlderThan(obj, kOrphanMinAge)) remove(obj);
    } else if (std::find(stale_segments.begin(), stale_segments.end(), *owner) !=
               stale_segments.end()) {
      remove(obj);
    }
  }
  return result;
}

Status RemoveGroupObjects(std::string_view segment_name) {
  std::string seg(segment_name);
  std::string errors;
  Status s = GroupSegment::Remove(seg);
  if (!s.ok()) errors += s.message();
  // Which objects are segments decides ownership.
  std::vector<std::string> objects = ListWithPrefix(seg + "-");
  std::vector<std::string> segments = {seg};
  for (const std::string& name : objects) {
    if (GroupSegment::Open(name).ok()) segments.push_back(name);
  }
  for (const std::string& name : objects) {
    const std::string* owner = OwnerOf(name, segments);
    if (owner == nullptr || *owner != seg) continue;
    Status r = GroupSegment::Remove(name);
    if (!r.ok()) errors += (errors.empty() ? "" : "; ") + r.message();
  }
  if (!errors.empty()) return InternalError("removing objects of " + seg + ": " + errors);
  return OkStatus();
}

Status RemoveStaleSocket(const std::string& socket_path, bool* removed) {
  *removed = false;
  std::string lock_path = LockPathFor(socket_path);
  int raw = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  if (raw < 0) {
    if (errno != ENOENT) return ErrnoToStatus(errno, "open " + lock_path);
    // No lock file: a socket left alone is stale only if nothing answers; the
    // broker always makes the lock first, so no broker made this socket.
  } else {
    UniqueFd lock(raw);
    if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return OkStatus();  // a broker is alive
      return ErrnoToStatus(errno, "flock " + lock_path);
    }
    // We hold the lock: no broker can be using the socket. The lock file
    // stays: a broker starting now may have opened it already, and if it were
    // unlinked that broker would lock the orphaned file while the next one
    // creates and locks a new one: two brokers on one socket.
    if (::unlink(socket_path.c_str()) == 0) *removed = true;
    return OkStatus();
  }
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return OkStatus();
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return ErrnoToStatus(errno, "socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  if (RetryOnEintr([&] {
        return ::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      }) == 0) {
    return OkStatus();  // something answers: not ours to remove
  }
  if (errno == ECONNREFUSED && ::unlink(socket_path.c_str()) == 0) *removed = true;
  return OkStatus();
}

}  // namespace qr::ipc
