#include "ipc/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "common/shm_object.h"
#include "common/status_macros.h"
#include "common/syscall.h"
#include "ipc/names.h"

namespace qr::ipc {

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

GroupSegment::~GroupSegment() = default;

Status GroupSegment::Lock(off_t offset, const char* what) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  if (RetryOnEintr([&] { return ::fcntl(mapping_.fd(), F_OFD_SETLK, &fl); }) == 0)
    return OkStatus();
  if (errno == EAGAIN || errno == EACCES) {
    return AlreadyExistsError(std::string(what) + " of " + name() + " is held by a live process");
  }
  return ErrnoToStatus(errno, "locking " + name());
}

bool GroupSegment::Held(off_t offset) const {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  if (RetryOnEintr([&] { return ::fcntl(mapping_.fd(), F_OFD_GETLK, &fl); }) != 0) return true;
  return fl.l_type != F_UNLCK;
}

Status GroupSegment::LockSlot(int rank) {
  return Lock(static_cast<off_t>(kSlotsOffset + static_cast<size_t>(rank) * kMemberSlotBytes),
              "the slot lock");
}
Status GroupSegment::LockBroker() { return Lock(0, "the broker lock"); }
bool GroupSegment::SlotHeld(int rank) const {
  return Held(static_cast<off_t>(kSlotsOffset + static_cast<size_t>(rank) * kMemberSlotBytes));
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
  QR_CHECK(p.world_size >= 1 && p.world_size <= kMaxWorldSize) << p.world_size;
  QR_RETURN_IF_ERROR(ValidateShmName(p.name));
  // Exclusive, 0600, reserved (a full /dev/shm fails here, not with SIGBUS
  // below). The mapping owns the name until the end: anything failing on the
  // way removes it.
  QR_ASSIGN_OR_RETURN(ShmMapping mapping,
                      ShmMapping::Create(p.name, GroupSegmentBytes(p.world_size)));
  std::memset(mapping.data(), 0, mapping.size());
  auto* h = static_cast<GroupSegmentHeader*>(mapping.data());
  h->layout_version = kGroupSegmentLayoutVersion;
  h->world_size = static_cast<uint32_t>(p.world_size);
  h->generation = p.generation;
  h->state = static_cast<uint32_t>(GroupState::kInit);
  h->uid = ::getuid();
  h->broker_pid = ::getpid();
  h->buffer_bytes = p.buffer_bytes;
  h->created_unix_ms = NowUnixMs();
  CopyField(h->group, sizeof(h->group), p.group);
  CopyField(h->socket_path, sizeof(h->socket_path), p.socket_path);
  std::unique_ptr<GroupSegment> seg(new GroupSegment(std::move(mapping), p.world_size));
  // Locked before the magic is visible, so no sweep ever sees it unowned.
  Status locked = seg->LockBroker();
  if (!locked.ok()) return locked;
  StoreRelease(&h->magic, kSegmentMagic);
  // Removal is explicit from now on (Remove, ipc/gc.h).
  seg->mapping_.Disown();
  return seg;
}

StatusOr<std::unique_ptr<GroupSegment>> GroupSegment::Open(std::string_view name) {
  std::string n(name);
  QR_RETURN_IF_ERROR(ValidateShmName(n));
  // Only our own 0600 objects: /dev/shm is world-writable, and another user's
  // object under one of our names must never be read, written or adopted.
  QR_ASSIGN_OR_RETURN(ShmMapping mapping, ShmMapping::OpenWhole(n, GroupSegmentBytes(2)));
  const size_t size = mapping.size();
  if (size > GroupSegmentBytes(kMaxWorldSize)) {
    return InvalidArgumentError(n + " is not a quickreduce group segment (size " +
                                std::to_string(size) + ")");
  }
  std::unique_ptr<GroupSegment> seg(new GroupSegment(std::move(mapping), 0));
  auto* h = seg->header();
  if (LoadAcquire(&h->magic) != kSegmentMagic) {
    return InvalidArgumentError(n + " is not a quickreduce group segment (bad magic)");
  }
  if (h->layout_version != kGroupSegmentLayoutVersion) {
    return InvalidArgumentError(n + " has layout version " + std::to_string(h->layout_version) +
                                ", this build reads " + std::to_string(kGroupSegmentLayoutVersion));
  }
  int ws = static_cast<int>(h->world_size);
  // A segment is exactly GroupSegmentBytes(ws).
  if (!ValidateWorldSize(ws).ok() || size != GroupSegmentBytes(ws)) {
    return InvalidArgumentError(n + " has an inconsistent world size " + std::to_string(ws) +
                                " for its " + std::to_string(size) + " bytes");
  }
  seg->world_size_ = ws;
  return seg;
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
