// ShmMapping: a move-only POSIX shared-memory object mapped into this process.
//
// The host backend keeps each rank's receive buffers and flags in one such
// object: the rank that creates it owns the name (unlinks it on destruction);
// peers open it by name and only unmap. Not thread-safe; the mapping itself
// may be shared by any number of threads and processes.
#ifndef QR_COMM_SHM_MAPPING_H_
#define QR_COMM_SHM_MAPPING_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace qr {

class ShmMapping {
 public:
  ShmMapping() = default;
  ShmMapping(ShmMapping&& other) noexcept;
  ShmMapping& operator=(ShmMapping&& other) noexcept;
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;
  ~ShmMapping();  // unmaps; unlinks the name if this object created it

  // Creates `name` ("/..." as shm_open wants) exclusively with mode 0600,
  // its `bytes` reserved (posix_fallocate; zero-filled) and mapped
  // read-write. Returns kAlreadyExists if the name is taken, kInvalidArgument
  // for a bad name, kUnavailable "not enough shared memory: need N MiB in
  // /dev/shm, M free" when it does not fit.
  [[nodiscard]] static StatusOr<ShmMapping> Create(std::string_view name, size_t bytes);
  // Maps an existing object read-write. kUnavailable if it does not exist,
  // is not ours with mode 0600, or holds fewer than `bytes` (checked before
  // mapping). A truncate by its owner after mapping still faults the mapper
  // with SIGBUS on the next access: POSIX offers no way to prevent it, and
  // only the same uid (a peer of the group) can do it.
  [[nodiscard]] static StatusOr<ShmMapping> Open(std::string_view name, size_t bytes);

  void* data() const { return base_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }
  bool owner() const { return owner_; }
  bool valid() const { return base_ != nullptr; }

  // Unmaps (and unlinks if owner) now; idempotent.
  void Reset();

 private:
  ShmMapping(std::string name, void* base, size_t bytes, bool owner)
      : name_(std::move(name)), base_(base), bytes_(bytes), owner_(owner) {}

  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
};

}  // namespace qr

#endif  // QR_COMM_SHM_MAPPING_H_
