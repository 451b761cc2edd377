// The host backend: the two-shot reference (kernels/two_shot_reference.h) and
// the one-shot reference (kernels/one_shot_reference.h) run across processes
// over POSIX shared memory, bit-identical to ReferenceAllReduce() and
// ReferenceOneShotAllReduce(); AllReduceCall::algorithm picks.
//
// Each rank creates one shm object `<group segment>-host<rank>` (0600) with a
// header page, a flag page, its two-shot receive buffer (2 phases x
// kHostSlots slots of 32 KiB at the reference's fixed offsets) and its
// one-shot receive region (2 phases x world size shares of the group's
// one-shot ceiling, comm/host_backend_layout.h), all of it reserved in
// /dev/shm at creation, publishes the name in its slot
// (BlobKind::kHostSegment) and maps every peer's object after READY.
// A one-shot call writes my encoded input into every rank's region, raises
// one flag, waits for all sources and sums them; calls alternate between the
// region's two phases (host_backend.cc says why two are enough).
// A two-shot call is processed in rounds of up to kHostSlots tiles: encode
// my input segments into the owners' phase-0 slots, raise my flag there, wait
// for all sources, reduce, re-encode into every rank's phase-1 slots, raise
// flags, wait, decode. Flags hold a round (two-shot) or call (one-shot)
// number, the colour, that only grows, so no call ever matches a stale flag;
// ranks whose calls disagree (size, dtype, codec, algorithm) fail the group.
// Every wait is bounded (QR_OP_TIMEOUT_MS, default 30000, per wait: a long
// call that keeps progressing never times out) and polls the group's abort
// word; a wait that times out raises the abort so the peers stop too.
// Connect() ends with a barrier (every peer has mapped this rank's buffer),
// so a rank may leave right after joining.
#ifndef QR_COMM_HOST_BACKEND_H_
#define QR_COMM_HOST_BACKEND_H_

#include <cstdint>
#include <limits>
#include <memory>

#include "comm/backend.h"
#include "common/status.h"

namespace qr {

// Tiles per round; also the number of receive slots per phase.
inline constexpr int64_t kHostSlots = 64;

struct HostBackendOptions {
  int64_t op_timeout_ms = 30000;    // bound of every single wait of a call
  int64_t join_timeout_ms = 60000;  // bound of Connect()'s barrier
  // The group's one-shot ceiling (comm/policy.h OneShotCeilingBytes), which
  // sizes the one-shot region: the same on every rank, or Connect() refuses
  // the peers' buffers. The default holds the largest call the layout allows.
  uint64_t one_shot_ceiling_bytes = std::numeric_limits<uint64_t>::max();
};

// A backend for `rank` of a `world_size` group. Nothing is allocated until
// Allocate(). Errors: kInvalidArgument for a bad rank/world size.
[[nodiscard]] StatusOr<std::unique_ptr<Backend>> CreateHostBackend(
    int rank, int world_size, const HostBackendOptions& options);

// Bytes of the shm object one rank of a `world_size` group creates (and
// reserves) for the group's one-shot ceiling (same clamp as the backend).
size_t HostSegmentBytes(int world_size, uint64_t one_shot_ceiling_bytes);

}  // namespace qr

#endif  // QR_COMM_HOST_BACKEND_H_
