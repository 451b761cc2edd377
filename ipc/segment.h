// The group segment: one POSIX shared-memory object per group generation,
// `/quickreduce-<uid>-<group>-<generation>-<nonce>` (ipc/names.h), mode 0600.
//
// Layout (layout version 1, all integers little-endian, offsets fixed):
//   [0, 4096)        GroupSegmentHeader, written only by the broker.
//   [4096, 8192)     the abort page: the abort word at offset 0. The broker
//                    raises it when a member dies; a member raises it when it
//                    gives up. Page-aligned so a GPU can map the page.
//   [8192 + r*512)   MemberSlot of rank r, written only by rank r's member.
// Cross-process access is by atomic loads and stores (no mutex): a member
// fills its slot, then stores published = 1 with release order; readers load
// published with acquire order before reading the rest. The broker stores
// magic last (release) when creating, so a reader seeing the magic sees an
// initialised header.
//
// Liveness. Owners hold open-file-description record locks (F_OFD_SETLK) on
// the segment object: the managing broker on byte 0, member r on the first
// byte of slot r. The kernel drops a lock when its holder dies, so "is rank r
// alive" and "is this segment still used" are answered by F_OFD_GETLK, which
// works across PID namespaces (containers sharing /dev/shm) and never
// mistakes a reused pid for a live owner. Pids are kept for display only.
#ifndef QR_IPC_SEGMENT_H_
#define QR_IPC_SEGMENT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/limits.h"
#include "common/shm_object.h"
#include "common/status.h"

namespace qr::ipc {

inline constexpr uint64_t kSegmentMagic = 0x3147455352425151ull;  // "QQBRSEG1"
inline constexpr uint32_t kGroupSegmentLayoutVersion = 1;
inline constexpr size_t kPageBytes = 4096;
inline constexpr size_t kAbortPageOffset = 4096;
inline constexpr size_t kSlotsOffset = 8192;
inline constexpr size_t kMemberSlotBytes = 512;
inline constexpr int kMaxCounters = 8;  // >= kNumCounters (ipc/group_types.h)

enum class GroupState : uint32_t { kInit = 0, kReady = 1, kFailed = 2 };
const char* GroupStateName(uint32_t state);  // "INIT", "READY", "FAILED", "UNKNOWN"

// Abort word values.
inline constexpr uint32_t kAbortNone = 0;
inline constexpr uint32_t kAbortMemberDied = 1;  // broker: a member died
inline constexpr uint32_t kAbortRaised = 2;      // a member gave up

struct GroupSegmentHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t world_size;
  uint64_t generation;
  uint32_t state;  // GroupState; atomic
  uint32_t uid;
  int32_t broker_pid;  // the broker that created or last adopted the group
  uint32_t reserved0;
  uint64_t buffer_bytes;
  uint64_t created_unix_ms;
  uint64_t ready_unix_ms;   // atomic
  uint64_t failed_unix_ms;  // atomic
  char group[64];
  int32_t joined_pid[kMaxWorldSize];  // atomic; the pid holding each rank, 0 = free
  char failure_reason[256];           // written before state becomes FAILED
  char socket_path[112];              // the socket of the broker that owns the group
};

struct MemberSlot {
  uint32_t published;  // atomic; 1 once the fields below are written
  uint32_t left;       // atomic; 1 once the member left cleanly
  int32_t pid;
  uint32_t kind;  // BlobKind (ipc/group_types.h)
  uint64_t buffer_bytes;
  uint64_t published_unix_ms;
  char device_id[64];
  uint8_t blob[64];
  uint64_t ops[kMaxCounters];      // atomic, per counter (ipc/group_types.h)
  uint64_t bytes[kMaxCounters];    // atomic, per counter
  uint64_t last_progress_unix_ms;  // atomic
  char abort_reason[128];          // written before the member raises abort
  // A word every member must publish equal; the clients compare it once the
  // group is READY (comm/ puts the largest one-shot message there).
  uint64_t agreed;
};

static_assert(std::is_trivially_copyable_v<GroupSegmentHeader>);
static_assert(std::is_trivially_copyable_v<MemberSlot>);
static_assert(sizeof(GroupSegmentHeader) <= kPageBytes);
static_assert(sizeof(MemberSlot) <= kMemberSlotBytes);

// Total bytes of a segment for world_size ranks.
constexpr size_t GroupSegmentBytes(int world_size) {
  return kSlotsOffset + static_cast<size_t>(world_size) * kMemberSlotBytes;
}

uint64_t NowUnixMs();

// Typed atomic access to fields that live in shared memory.
template <typename T>
T LoadAcquire(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename T>
void StoreRelease(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

// A mapping of one group segment. Move-only by pointer; unmaps on destruction
// (never unlinks: removal is explicit, see Remove). Not thread-safe itself;
// the shared fields are accessed atomically as described above.
class GroupSegment {
 public:
  struct CreateParams {
    std::string name;  // SegmentName(...)
    std::string group;
    int world_size = 0;
    uint64_t generation = 0;
    uint64_t buffer_bytes = 0;
    std::string socket_path;  // of the creating broker; only it (or its successor) adopts
  };
  // Creates the object exclusively (kAlreadyExists if the name is taken),
  // reserves its pages (posix_fallocate), maps and initialises it, holding
  // the broker lock (the creator is the managing broker). kUnavailable "not
  // enough shared memory ..." when /dev/shm is full.
  [[nodiscard]] static StatusOr<std::unique_ptr<GroupSegment>> Create(const CreateParams& p);
  // Maps an existing segment. kUnavailable if it does not exist or is not
  // ours (another owner, a mode other than 0600, too small: see
  // common/shm_object.h), kInvalidArgument if it is not a valid
  // layout-version-1 segment. The size is checked before mapping; an owner
  // that truncates the object after that can still fault every mapper
  // (SIGBUS): nothing in POSIX prevents it, only the same uid can do it.
  [[nodiscard]] static StatusOr<std::unique_ptr<GroupSegment>> Open(std::string_view name);
  // Unlinks a shm object by name; OK if it did not exist.
  [[nodiscard]] static Status Remove(std::string_view name);

  ~GroupSegment();
  GroupSegment(const GroupSegment&) = delete;
  GroupSegment& operator=(const GroupSegment&) = delete;

  GroupSegmentHeader* header() const { return static_cast<GroupSegmentHeader*>(mapping_.data()); }
  uint32_t* abort_word() const { return reinterpret_cast<uint32_t*>(base() + kAbortPageOffset); }
  void* abort_page() const { return base() + kAbortPageOffset; }
  MemberSlot* slot(int rank) const {
    return reinterpret_cast<MemberSlot*>(base() + kSlotsOffset +
                                         static_cast<size_t>(rank) * kMemberSlotBytes);
  }
  int world_size() const { return world_size_; }
  const std::string& name() const { return mapping_.name(); }

  // Takes rank's slot lock (a member, after Join) or the broker's lock, held
  // until this object is destroyed. kAlreadyExists if a live process holds it.
  [[nodiscard]] Status LockSlot(int rank);
  [[nodiscard]] Status LockBroker();
  // Whether another open description holds rank's slot lock / the broker
  // lock (this object's own locks do not count).
  bool SlotHeld(int rank) const;
  bool BrokerHeld() const;
  // True while a broker or any member holds its lock: the segment is in use.
  bool InUse() const;

 private:
  GroupSegment(ShmMapping mapping, int world_size)
      : mapping_(std::move(mapping)), world_size_(world_size) {}
  char* base() const { return static_cast<char*>(mapping_.data()); }
  Status Lock(off_t offset, const char* what);
  bool Held(off_t offset) const;

  // Its descriptor carries the record locks; closed (dropping them) on
  // destruction. Never owns the name.
  ShmMapping mapping_;
  int world_size_;
};

// Copies a string into a fixed char field, NUL-terminated, truncated.
void CopyField(char* dst, size_t dst_bytes, std::string_view src);
// Reads a NUL-terminated fixed char field.
std::string ReadField(const char* src, size_t src_bytes);

}  // namespace qr::ipc

#endif  // QR_IPC_SEGMENT_H_
