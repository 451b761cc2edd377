#include "ipc/broker/join_checks.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ipc/group_types.h"
#include "ipc/names.h"

namespace qr::broker {

using ipc::GroupState;

namespace {

// Two ranks on one GPU only when every GPU member of the group, `req`
// included, asked for it (QR_ALLOW_SHARED_DEVICE): a testing mode in which
// every rank caps its grids so the kernels sharing a GPU fit on it together.
Status CheckSharedDevice(const Group& g, const ipc::JoinRequest& req) {
  if (req.device_id == ipc::kHostDeviceName) return OkStatus();
  int same = -1;  // a member on req's device
  bool shared = false;
  std::vector<int> unwilling;
  std::set<std::string> devices;
  for (int r = 0; r < g.world_size; ++r) {
    const auto& m = g.members[static_cast<size_t>(r)];
    if (!m.has_value() || m->device == ipc::kHostDeviceName) continue;
    if (!devices.insert(m->device).second) shared = true;
    if (m->device == req.device_id && same < 0) same = r;
    if (!m->allow_shared_device) unwilling.push_back(r);
  }
  if (same < 0 && !shared) return OkStatus();
  if (!req.allow_shared_device) unwilling.push_back(static_cast<int>(req.rank));
  if (unwilling.empty()) return OkStatus();
  std::sort(unwilling.begin(), unwilling.end());
  const std::string what = same >= 0 ? "device " + req.device_id + " is already rank " +
                                           std::to_string(same) + " of " + g.Describe()
                                     : g.Describe() + " has ranks sharing a GPU";
  return AlreadyExistsError(what +
                            " (two ranks cannot share one GPU unless every rank sets "
                            "QR_ALLOW_SHARED_DEVICE=1, a testing mode for NVIDIA MPS; ranks " +
                            ipc::RankList(unwilling) + " did not)");
}

// Why `req` cannot join the existing group g, or OK.
}  // namespace

Status CheckJoinsExisting(const Group& g, const ipc::JoinRequest& req) {
  // One reading of the shared word, so every rule below sees the same state.
  const uint32_t state = g.state();
  if (g.adopted) {
    return AlreadyExistsError(g.Describe() + " is " + ipc::GroupStateName(state) +
                              " and runs without the broker (adopted after a broker "
                              "restart); wait until its members leave");
  }
  if (state == static_cast<uint32_t>(GroupState::kFailed)) {
    return PeerFailedError(g.Describe() + " FAILED (" +
                           ipc::ReadField(g.seg->header()->failure_reason, 256) +
                           "); the name can be joined again once all its members have left");
  }
  if (state == static_cast<uint32_t>(GroupState::kReady)) {
    return AlreadyExistsError(g.Describe() + " is READY with all " + std::to_string(g.world_size) +
                              " ranks");
  }
  const int ws = static_cast<int>(req.world_size);
  if (ws != g.world_size) {
    return InvalidArgumentError("world size " + std::to_string(ws) + " does not match " +
                                g.Describe() + "'s world size " + std::to_string(g.world_size));
  }
  if (req.buffer_bytes != g.buffer_bytes) {
    return InvalidArgumentError("buffer geometry " + std::to_string(req.buffer_bytes) +
                                " bytes does not match " + g.Describe() + "'s " +
                                std::to_string(g.buffer_bytes) + " bytes");
  }
  const int rank = static_cast<int>(req.rank);
  const auto& holder = g.members[static_cast<size_t>(rank)];
  if (holder.has_value()) {
    return AlreadyExistsError("rank " + std::to_string(rank) + " of " + g.Describe() +
                              " is taken by pid " + std::to_string(holder->pid));
  }
  return CheckSharedDevice(g, req);
}

}  // namespace qr::broker
