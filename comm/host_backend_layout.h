// The layout of a host-backend rank's shared-memory object (comm/host_backend.h
// says what travels through it): a header page, a flag page, the two-shot
// receive slots, then the one-shot receive region. Internal to the host
// backend and its test.
//
// The object holds only what the group can use: the one-shot region is sized
// from the one-shot ceiling the members agreed (comm/policy.h
// OneShotCeilingBytes; Communicator::Join refuses a group whose members
// differ, before any rank maps a peer), not for the largest one-shot call the
// geometry allows. Every byte of the object is reserved (posix_fallocate) at
// creation, so no access can fault for want of /dev/shm later. The geometry
// sent in JOIN (GeometryBytes) stays the largest layout, independent of the
// ceiling: ranks whose ceilings differ then still reach the join's check,
// which names QR_ONE_SHOT_MAX_KB, instead of the broker's geometry refusal.
#ifndef QR_COMM_HOST_BACKEND_LAYOUT_H_
#define QR_COMM_HOST_BACKEND_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "comm/host_backend.h"
#include "common/limits.h"
#include "kernels/geometry.h"
#include "kernels/two_shot_reference.h"

namespace qr::host {

inline constexpr uint64_t kMagic = 0x5152484f53543031ULL;  // "QRHOST01"
// 4: the one-shot shares are as large as the agreed ceiling (3: the largest
// one-shot call at any ceiling).
inline constexpr uint32_t kLayoutVersion = 4;
inline constexpr size_t kPage = 4096;
inline constexpr int64_t kSlots = kHostSlots;

struct BufferHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t world_size;
  uint64_t num_slots;
  uint64_t one_shot_region_bytes;  // per phase: world size x the share
};

// One per (phase, source rank), written only by that source. `call` describes
// the call (size, codec, dtype) so ranks that disagree fail instead of mixing
// data; it is written before `colour` is released.
struct alignas(64) FlagLine {
  std::atomic<uint64_t> colour;
  std::atomic<uint64_t> call;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "flags in shared memory must be lock-free (address-free)");
static_assert(sizeof(FlagLine) == 64);

inline constexpr size_t kFlagsOffset = kPage;
// Flag sets: two-shot phases 0 and 1 (colour: the round), "connected" (the
// join barrier), and one-shot phases 0 and 1 (colour: the one-shot call).
// One-shot has sets of its own so that a rank one call ahead in one
// algorithm never overwrites a flag (and its call description) that a slower
// rank is still waiting on in the other.
inline constexpr int kConnectedSet = 2;
inline constexpr int kOneShotSet = 3;  // + phase
inline constexpr int kNumFlagSets = 5;
inline constexpr size_t kFlagsBytes = kNumFlagSets * kMaxWorldSize * sizeof(FlagLine);
static_assert(kFlagsBytes <= kPage);
inline constexpr size_t kDataOffset = 2 * kPage;
// The one-shot receive region (2 phases) follows the two-shot slots.
inline constexpr size_t kOneShotOffset =
    kDataOffset +
    (static_cast<size_t>(kernels::RecvBufferBytes(kSlots)) + kPage - 1) / kPage * kPage;

constexpr bool IsOneShotSet(int set) { return set == kOneShotSet || set == kOneShotSet + 1; }

// Where each part lies for one group: the one-shot share of each source
// (bytes per phase) follows from the world size and the agreed ceiling.
struct Layout {
  int world_size = 2;
  uint64_t one_shot_share = 0;  // bytes per source and phase, a multiple of 16

  // `ceiling_bytes` is the group's one-shot ceiling (0: never one-shot),
  // capped at what the largest layout holds (kernels::OneShotMaxBytes).
  static constexpr Layout For(int world_size, uint64_t ceiling_bytes) {
    const auto most = static_cast<uint64_t>(kernels::OneShotMaxBytes(world_size));
    return Layout{world_size, ceiling_bytes < most ? (ceiling_bytes + 15) / 16 * 16 : most};
  }
  constexpr uint64_t one_shot_region_bytes() const {
    return static_cast<uint64_t>(world_size) * one_shot_share;
  }
  // The object's size, every byte of it reserved.
  constexpr size_t object_bytes() const {
    const size_t end = kOneShotOffset + 2 * static_cast<size_t>(one_shot_region_bytes());
    return (end + kPage - 1) / kPage * kPage;
  }
  // The largest layout (the ceiling at its cap), whatever the world size.
  static constexpr size_t GeometryBytes() {
    return kOneShotOffset + 2 * static_cast<size_t>(kernels::kOneShotRegionBytes);
  }
};
static_assert(Layout::For(2, ~uint64_t{0}).object_bytes() == Layout::GeometryBytes());
static_assert(Layout::For(8, ~uint64_t{0}).object_bytes() == Layout::GeometryBytes());

// A mapped receive buffer, ours or a peer's, read through the group's layout.
struct View {
  uint8_t* base = nullptr;
  Layout layout;

  BufferHeader* header() const { return reinterpret_cast<BufferHeader*>(base); }
  FlagLine& flag(int phase, int source) const {
    return reinterpret_cast<FlagLine*>(base + kFlagsOffset)[phase * kMaxWorldSize + source];
  }
  uint8_t* recv(int64_t slot, int phase, int source) const {
    return base + kDataOffset + kernels::RecvOffset(kSlots, slot, phase, source, layout.world_size);
  }
  // Where `source`'s one-shot values of `phase` land: one share each, at
  // offsets that depend on the layout only, not on the call.
  uint16_t* one_shot(int phase, int source) const {
    return reinterpret_cast<uint16_t*>(base + kOneShotOffset +
                                       static_cast<size_t>(phase) * layout.one_shot_region_bytes() +
                                       static_cast<size_t>(source) * layout.one_shot_share);
  }
};

}  // namespace qr::host

#endif  // QR_COMM_HOST_BACKEND_LAYOUT_H_
