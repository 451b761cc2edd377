#include "ipc/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <chrono>
#include <cstring>

#include "common/status_macros.h"
#include "common/syscall.h"
#include "ipc/names.h"

namespace qr::ipc {
namespace bip = boost::interprocess;

namespace {

Status FromBoost(const bip::interprocess_exception& e, std::string_view what) {
  int err = e.get_native_error();
  if (err != 0) return ErrnoToStatus(err, what);
  return InternalError(std::string(what) + ": " + e.what());
}

}  // namespace

const char* GroupStateName(uint32_t state) {
  switch (static_cast<GroupState>(state)) {
    case GroupState::kInit:
      return "INIT";
    case GroupState::kReady:
      return "READY";
    case GroupState::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

uint64_t NowUnixMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void CopyField(char* dst, size_t dst_bytes, std::string_view src) {
  size_t n = std::min(src.size(), dst_bytes - 1);
  std::memcpy(dst, src.data(), n);
  std::memset(dst + n, 0, dst_bytes - n);
}

std::string ReadField(const char* src, size_t src_bytes) {
  return std::string(src, strnlen(src, src_bytes));
}

GroupSegment::GroupSegment(std::string name, std::shared_ptr<void> mapping, void* base,
                           int world_size, UniqueFd fd)
    : name_(std::move(name)),
      fd_(std::move(fd)),
      mapping_(std::move(mapping)),
      base_(base),
      world_size_(world_size) {}

namespace {

// A second descriptor of the object, for the record locks (Boost keeps its
// own private).
StatusOr<UniqueFd> OpenForLocks(const std::string& name) {
  QR_ASSIGN_OR_RETURN(int fd, SysCall("shm_open " + name, [&] {
                        return ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
                      }));
  return UniqueFd(fd);
}

}  // namespace

Status GroupSegment::Lock(off_t offset, const char* what) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  if (RetryOnEintr([&] { return ::fcntl(fd_.get(), F_OFD_SETLK, &fl); }) == 0) return OkStatus();
  if (errno == EAGAIN || errno == EACCES) {
    return AlreadyExistsError(std::string(what) + " of " + name_ + " is held by a live process");
  }
  return ErrnoToStatus(errno, "locking " + name_);
}

bool GroupSegment::Held(off_t offset) const {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  if (RetryOnEintr([&] { return ::fcntl(fd_.get(), F_OFD_GETLK, &fl); }) != 0) return true;
  return fl.l_type != F_UNLCK;
}

Status GroupSegment::LockSlot(int rank) {
  return Lock(static_cast<off_t>(kSlotsOffset + static_cast<size_t>(rank) * kSlotBytes),
              "the slot lock");
}
Status GroupSegment::LockBroker() { return Lock(0, "the broker lock"); }
bool GroupSegment::SlotHeld(int rank) const {
  return Held(static_cast<off_t>(kSlotsOffset + static_cast<size_t>(rank) * kSlotBytes));
}
bool GroupSegment::BrokerHeld() const { return Held(0); }

bool GroupSegment::InUse() const {
  if (BrokerHeld()) return true;
  for (int r = 0; r < world_size_; ++r) {
    if (SlotHeld(r)) return true;
  }
  return false;
}

StatusOr<std::unique_ptr<GroupSegment>> GroupSegment::Create(const CreateParams& p) {
  QR_CHECK(p.world_size >= 1 && p.world_size <= kMaxRanks) << p.world_size;
  const size_t bytes = SegmentBytes(p.world_size);
  std::shared_ptr<bip::mapped_region> region;
  try {
    bip::permissions perm(0600);
    bip::shared_memory_object shm(bip::create_only, p.name.c_str(), bip::read_write, perm);
    try {
      shm.truncate(static_cast<bip::offset_t>(bytes));
      region = std::make_shared<bip::mapped_region>(shm, bip::read_write, 0, bytes);
    } catch (const bip::interprocess_exception& e) {
      bip::shared_memory_object::remove(p.name.c_str());
      return FromBoost(e, "sizing shared memory " + p.name);
    }
  } catch (const bip::interprocess_exception& e) {
    return FromBoost(e, "creating shared memory " + p.name);
  }
  auto fd = OpenForLocks(p.name);
  if (!fd.ok()) {
    bip::shared_memory_object::remove(p.name.c_str());
    return fd.status();
  }
  void* base = region->get_address();
  std::memset(base, 0, bytes);
  auto* h = static_cast<SegmentHeader*>(base);
  h->layout_version = kLayoutVersion;
  h->world_size = static_cast<uint32_t>(p.world_size);
  h->generation = p.generation;
  h->state = static_cast<uint32_t>(GroupState::kInit);
  h->uid = ::getuid();
  h->broker_pid = ::getpid();
  h->buffer_bytes = p.buffer_bytes;
  h->created_unix_ms = NowUnixMs();
  CopyField(h->group, sizeof(h->group), p.group);
  CopyField(h->socket_path, sizeof(h->socket_path), p.socket_path);
  std::unique_ptr<GroupSegment> seg(
      new GroupSegment(p.name, std::move(region), base, p.world_size, std::move(*fd)));
  // Locked before the magic is visible, so no sweep ever sees it unowned.
  Status locked = seg->LockBroker();
  if (!locked.ok()) {
    bip::shared_memory_object::remove(p.name.c_str());
    return locked;
  }
  StoreRelease(&h->magic, kSegmentMagic);
  return seg;
}

StatusOr<std::unique_ptr<GroupSegment>> GroupSegment::Open(std::string_view name) {
  std::string n(name);
  std::shared_ptr<bip::mapped_region> region;
  try {
    bip::shared_memory_object shm(bip::open_only, n.c_str(), bip::read_write);
    bip::offset_t size = 0;
    if (!shm.get_size(size) || size < static_cast<bip::offset_t>(SegmentBytes(2))) {
      return InvalidArgumentError(n + " is not a quickreduce group segment (size " +
                                  std::to_string(size) + ")");
    }
    region =
        std::make_shared<bip::mapped_region>(shm, bip::read_write, 0, static_cast<size_t>(size));
  } catch (const bip::interprocess_exception& e) {
    return FromBoost(e, "opening shared memory " + n);
  }
  void* base = region->get_address();
  auto* h = static_cast<SegmentHeader*>(base);
  if (LoadAcquire(&h->magic) != kSegmentMagic) {
    return InvalidArgumentError(n + " is not a quickreduce group segment (bad magic)");
  }
  if (h->layout_version != kLayoutVersion) {
    return InvalidArgumentError(n + " has layout version " + std::to_string(h->layout_version) +
                                ", this build reads " + std::to_string(kLayoutVersion));
  }
  int ws = static_cast<int>(h->world_size);
  if (!ValidateWorldSize(ws).ok() || region->get_size() < SegmentBytes(ws)) {
    return InvalidArgumentError(n + " has an inconsistent world size " + std::to_string(ws));
  }
  QR_ASSIGN_OR_RETURN(UniqueFd fd, OpenForLocks(n));
  return std::unique_ptr<GroupSegment>(
      new GroupSegment(n, std::move(region), base, ws, std::move(fd)));
}

Status GroupSegment::Remove(std::string_view name) {
  std::string n(name);
  if (n.empty() || n[0] != '/') n = "/" + n;
  if (::shm_unlink(n.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, "shm_unlink " + n);
  }
  return OkStatus();
}

}  // namespace qr::ipc
