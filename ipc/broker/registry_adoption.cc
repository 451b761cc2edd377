// Adoption (registry.h): the groups an earlier broker of this socket left,
// and how their members, who have no connection to us, are watched.
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "ipc/broker/registry.h"
#include "ipc/gc.h"
#include "ipc/group_types.h"
#include "ipc/names.h"
#include "spdlog/spdlog.h"

namespace qr::broker {

using ipc::GroupState;
using ipc::LoadAcquire;

void Registry::Adopt() {
  for (const std::string& name : ipc::ListUserObjects(::getuid())) {
    auto seg = ipc::GroupSegment::Open(name);
    if (!seg.ok()) continue;
    ipc::GroupSegmentHeader* h = (*seg)->header();
    // Groups belong to the broker of one socket (several may run, e.g. in
    // tests); another live broker's groups (it holds the lock) are not ours.
    if (ipc::ReadField(h->socket_path, sizeof(h->socket_path)) != options_.socket_path ||
        !(*seg)->LockBroker().ok()) {
      continue;
    }
    auto g = std::make_unique<Group>();
    g->name = ipc::ReadField(h->group, sizeof(h->group));
    g->generation = h->generation;
    g->world_size = (*seg)->world_size();
    g->buffer_bytes = h->buffer_bytes;
    g->adopted = true;
    g->members.resize(static_cast<size_t>(g->world_size));
    auto parts = ipc::ParseSegmentName(name);
    if (!parts.has_value() || parts->uid != ::getuid() || parts->group != g->name ||
        parts->generation != g->generation || groups_.count(g->name) != 0) {
      continue;  // not a name this broker could have made
    }
    uint64_t& last = last_generation_[g->name];
    last = std::max(last, g->generation);
    for (int r = 0; r < g->world_size; ++r) {
      ipc::MemberSlot* slot = (*seg)->slot(r);
      if (LoadAcquire(&slot->left) != 0) continue;
      if (!(*seg)->SlotHeld(r)) continue;
      int32_t pid = LoadAcquire(&slot->published) != 0 ? slot->pid : LoadAcquire(&h->joined_pid[r]);
      Member m;
      m.pid = pid;
      m.device = ipc::ReadField(slot->device_id, sizeof(slot->device_id));
      m.published = LoadAcquire(&slot->published) != 0;
      g->members[static_cast<size_t>(r)] = std::move(m);
    }
    h->broker_pid = ::getpid();
    g->seg = std::move(*seg);
    spdlog::info("adopted {} in state {} from an earlier broker", g->Describe(),
                 ipc::GroupStateName(g->state()));
    ++version_;
    std::string key = g->name;
    Group& ref = *g;
    groups_[key] = std::move(g);
    // Its members lost their connections with the old broker mid-formation.
    if (ref.In(GroupState::kInit)) {
      Fail(ref, "the broker restarted while the group was forming", ipc::kAbortMemberDied);
    }
  }
}

void Registry::TickAdopted(Group& g) {
  for (int r = 0; r < g.world_size; ++r) {
    auto& m = g.members[static_cast<size_t>(r)];
    if (!m.has_value()) continue;
    if (LoadAcquire(&g.seg->slot(r)->left) != 0) {
      Release(g, r);
    } else if (!g.seg->SlotHeld(r)) {
      Fail(g, RankAndPid(r, m->pid) + " died", ipc::kAbortMemberDied);
      Release(g, r);
    }
  }
}

}  // namespace qr::broker
