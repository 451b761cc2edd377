// qr-bench's link measurement: the peer-store bandwidth every quickreduce
// kernel is bound by (kernels/gpu/peer_bandwidth.h's LaunchPeerStore), with
// all ranks storing into all their peers at once and each rank alone. The
// report turns the SM stores' number into each row's "% of link limit";
// --peer-tma-chunks adds the same measurement by TMA bulk copies (issue 18
// item 8: docs/performance.md, "TMA bulk stores").
#ifndef QR_TOOLS_BENCH_PEER_H_
#define QR_TOOLS_BENCH_PEER_H_

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "tools/bench_options.h"
#include "tools/bench_report.h"

namespace qr::bench {

// `bytes` per destination per rep, `reps` reps, on streams[r] of GPU r, by
// `method`. GB/s per rank = bytes leaving it / its stream's time. Allocates
// (and frees) a receive buffer of bytes x world size per GPU. kUnsupported
// for TMA where the platform lacks it (LaunchPeerStore's errors).
// Sets args' method and chunk to `choice` (the flags' form of the launcher's
// method; qr-bench and qr-kernel-cost --peer-store).
void SetPeerStoreMethod(const PeerStoreChoice& choice, kernels::PeerStoreArgs& args);

[[nodiscard]] StatusOr<PeerBandwidth> MeasurePeerBandwidth(const std::vector<void*>& streams,
                                                           size_t bytes, int reps,
                                                           const PeerStoreChoice& method = {});

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_PEER_H_
