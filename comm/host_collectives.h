// Reduce-scatter and all-gather on the host backend: the host reference's
// steps (kernels/reduce_scatter_reference.h, kernels/all_gather_reference.h)
// over the host backend's shared receive buffers, bit-identical to
// ReferenceReduceScatter / ReferenceAllGather.
//
// A call runs in rounds of up to kHostSlots collective tiles
// (kernels/collective_layout.h), each round shaped exactly like an
// all-reduce round, with the same two flag sets and the same colour (the
// round number), so the all-reduce's argument that no rank overwrites a slot
// a peer still reads holds across any mix of calls:
//   reduce-scatter  phase 0 carries the data (every rank's shard s of each
//                   tile into rank s's phase-0 slot), then each rank reduces
//                   its shards into its output; phase 1 carries only the
//                   flags (raised once this rank has read its phase-0 slots);
//   all-gather      phase 0 carries only the flags (this rank has read the
//                   previous round's phase-1 slots); phase 1 carries the data
//                   (every rank's shard of each tile into every rank's
//                   phase-1 slot), which each rank then decodes.
// Calls that disagree across ranks (collective, size, codec, algorithm) fail
// the group as for the all-reduce: the collective is part of the call's
// description.
#ifndef QR_COMM_HOST_COLLECTIVES_H_
#define QR_COMM_HOST_COLLECTIVES_H_

#include <cstdint>

#include "comm/backend.h"
#include "common/status.h"

namespace qr {

// What the rounds need of the host backend that runs them.
class HostExchange {
 public:
  virtual ~HostExchange() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // `peer`'s receive slot `slot` of `phase` (0 or 1) for data from `source`.
  virtual uint8_t* RecvSlot(int peer, int64_t slot, int phase, int source) const = 0;
  // The next round's colour (every rank counts rounds the same way).
  virtual uint64_t NextRound() = 0;
  // Raises this rank's flag of `phase` at every rank with `colour` and the
  // call's description, then waits (bounded, polling the abort word) for
  // every rank's; kTimeout, kPeerFailed (also for a call mismatch).
  [[nodiscard]] virtual Status Sync(int phase, uint64_t colour, uint64_t desc) = 0;
};

// The description of a call for the flags: `desc` (the all-reduce's
// description of the same size, codec, dtype and algorithm) with the
// collective in bits 56..59.
constexpr uint64_t WithCollective(uint64_t desc, Collective collective) {
  return desc | static_cast<uint64_t>(collective) << 56;
}
constexpr Collective CollectiveOf(uint64_t desc) {
  return static_cast<Collective>((desc >> 56) & 0xf);
}
constexpr uint64_t WithoutCollective(uint64_t desc) { return desc & ~(uint64_t{0xf} << 56); }

// Runs a validated kReduceScatter or kAllGather call (call.count per rank)
// whose description, collective included, is `desc`. Slots per round:
// `num_slots`.
[[nodiscard]] Status RunHostCollective(HostExchange& x, const AllReduceCall& call, uint64_t desc,
                                       int64_t num_slots);

}  // namespace qr

#endif  // QR_COMM_HOST_COLLECTIVES_H_
