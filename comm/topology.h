// The group's topology rule: the two-shot and one-shot kernels store into
// every peer's buffer, so every pair of the group's distinct GPUs needs peer
// access, both ways. vLLM asks for full NVLink/XGMI above world size 2; we
// ask for what the kernels need, peer access (NVLink or PCIe), and check it
// for every pair, not only the pairs this rank belongs to, by PCI bus id so
// that it also holds with one visible GPU per process.
//
//   Status s = CheckPeerAccess(device_by_rank, [](const std::string& a,
//                                                  const std::string& b) {
//     return gpu::PeerAccessByPciBusId(a, b);   // kernels/platform/device_info.h
//   }, &undecided);
//
// Pure apart from `ask`; thread-compatible.
#ifndef QR_COMM_TOPOLOGY_H_
#define QR_COMM_TOPOLOGY_H_

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/platform/device_info.h"

namespace qr {

// Asks whether GPU a can read and write GPU b's memory.
using PeerAccessQuery =
    std::function<StatusOr<gpu::PeerAccessAnswer>(const std::string& a, const std::string& b)>;

// For every pair of ranks on different GPUs (device_by_rank[r] is rank r's
// PCI bus id; ranks sharing a GPU need no path), asks both directions once per
// pair of GPUs. kUnavailable naming the pair (both ranks and both ids) at the
// first answer "no"; the error of `ask` as is. Pairs nobody here could decide
// are appended to *undecided (when given) as "rank i (id) <-> rank j (id)":
// the caller decides those by opening the peer's IPC handle and seeing its
// stores.
[[nodiscard]] Status CheckPeerAccess(const std::vector<std::string>& device_by_rank,
                                     const PeerAccessQuery& ask,
                                     std::vector<std::string>* undecided = nullptr);

}  // namespace qr

#endif  // QR_COMM_TOPOLOGY_H_
