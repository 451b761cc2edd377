#include "comm/topology.h"

#include <set>
#include <utility>

#include "common/status_macros.h"

namespace qr {
namespace {

std::string Member(int rank, const std::string& id) {
  return "rank " + std::to_string(rank) + " (GPU " + id + ")";
}

}  // namespace

Status CheckPeerAccess(const std::vector<std::string>& device_by_rank, const PeerAccessQuery& ask,
                       std::vector<std::string>* undecided) {
  std::set<std::pair<std::string, std::string>> asked;
  const int n = static_cast<int>(device_by_rank.size());
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const std::string& a = device_by_rank[i];
      const std::string& b = device_by_rank[j];
      if (a == b || !asked.insert(a < b ? std::make_pair(a, b) : std::make_pair(b, a)).second) {
        continue;
      }
      bool unknown = false;
      for (const auto& [from, to] : {std::make_pair(a, b), std::make_pair(b, a)}) {
        QR_ASSIGN_OR_RETURN(const gpu::PeerAccessAnswer answer, ask(from, to));
        if (!answer.can.has_value()) {
          unknown = true;
          continue;
        }
        if (!*answer.can) {
          return UnavailableError(
              "no peer-to-peer access between " + Member(i, a) + " and " + Member(j, b) + " (GPU " +
              from + " cannot reach GPU " + to + ", said the " + answer.source +
              "): quickreduce stores into every peer's memory, so every pair of the group's GPUs "
              "needs peer access (NVLink/XGMI or PCIe P2P); use a group of GPUs that have it "
              "(nvidia-smi topo -p2p rw / rocm-smi --showtopo) or another all-reduce backend");
        }
      }
      if (unknown && undecided != nullptr) {
        undecided->push_back(Member(i, a) + " <-> " + Member(j, b));
      }
    }
  }
  return OkStatus();
}

}  // namespace qr
