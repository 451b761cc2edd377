// qr-bench's link measurement: the peer-store bandwidth every quickreduce
// kernel is bound by (kernels/gpu/peer_bandwidth.h's LaunchPeerStore), with
// all ranks storing into all their peers at once and each rank alone. The
// report turns it into each row's "% of link limit".
#ifndef QR_TOOLS_BENCH_PEER_H_
#define QR_TOOLS_BENCH_PEER_H_

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "tools/bench_report.h"

namespace qr::bench {

// `bytes` per destination per rep, `reps` reps, on streams[r] of GPU r.
// GB/s per rank = bytes leaving it / its stream's time. Allocates (and
// frees) a receive buffer of bytes x world size per GPU.
[[nodiscard]] StatusOr<PeerBandwidth> MeasurePeerBandwidth(const std::vector<void*>& streams,
                                                           size_t bytes, int reps);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_PEER_H_
