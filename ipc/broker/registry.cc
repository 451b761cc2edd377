#include "ipc/broker/registry.h"

#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "common/utf8.h"
#include "ipc/broker/join_checks.h"
#include "ipc/group_types.h"
#include "ipc/names.h"
#include "spdlog/spdlog.h"

namespace qr::broker {

using ipc::GroupState;
using ipc::LoadAcquire;
using ipc::StoreRelease;

bool Group::Empty() const {
  for (const auto& m : members) {
    if (m.has_value()) return false;
  }
  return true;
}

std::string Group::Describe() const {
  return "group " + name + " (generation " + std::to_string(generation) + ")";
}

std::string Registry::RankAndPid(int rank, int32_t pid) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
}

Group* Registry::Find(const std::string& name) {
  if (name.empty()) return nullptr;
  auto it = groups_.find(name);
  return it == groups_.end() ? nullptr : it->second.get();
}
void Registry::Join(const std::shared_ptr<Client>& c, const ipc::JoinRequest& req) {
  if (!c->group.empty()) {
    c->Refuse(InvalidArgumentError("this connection already holds rank " + std::to_string(c->rank) +
                                   " of group " + c->group));
    return;
  }
  const int rank = static_cast<int>(req.rank);
  Group* g = Find(req.group);
  if (g != nullptr) {
    if (Status s = CheckJoinsExisting(*g, req); !s.ok()) {
      c->Refuse(s);
      return;
    }
  } else {
    StatusOr<Group*> created = Create(req);
    if (!created.ok()) {
      c->Refuse(created.status());
      return;
    }
    g = *created;
  }
  Member m;
  m.client = c;
  m.pid = c->pid;
  m.device = req.device_id;
  m.allow_shared_device = req.allow_shared_device;
  m.timeout_ms = req.timeout_ms;
  m.deadline = Clock::now() + std::chrono::milliseconds(req.timeout_ms);
  g->members[static_cast<size_t>(rank)] = std::move(m);
  ++version_;
  StoreRelease(&g->seg->header()->joined_pid[rank], static_cast<int32_t>(c->pid));
  c->group = req.group;
  c->rank = rank;
  spdlog::info("pid {} joined {} as rank {}/{} on device {}", c->pid, g->Describe(), rank,
               g->world_size, req.device_id);
  c->Send(ipc::JoinOk{g->seg->name(), g->generation, req.rank, static_cast<int32_t>(::getpid())});
}

void Registry::Published(const std::shared_ptr<Client>& c) {
  Group* g = Find(c->group);
  if (g == nullptr) {
    c->Refuse(InvalidArgumentError("PUBLISHED before JOIN"));
    return;
  }
  auto& m = g->members[static_cast<size_t>(c->rank)];
  const ipc::MemberSlot* slot = g->seg->slot(c->rank);
  if (LoadAcquire(&slot->published) == 0) {
    c->Refuse(InvalidArgumentError("PUBLISHED but slot " + std::to_string(c->rank) + " of " +
                                   g->Describe() + " is not published"));
    return;
  }
  m->published = true;
  ++version_;
  if (!g->In(GroupState::kInit)) return;
  for (const auto& other : g->members) {
    if (!other.has_value() || !other->published) return;
  }
  ipc::GroupSegmentHeader* h = g->seg->header();
  StoreRelease(&h->ready_unix_ms, ipc::NowUnixMs());
  StoreRelease(&h->state, static_cast<uint32_t>(GroupState::kReady));
  spdlog::info("{} is READY", g->Describe());
  for (auto& other : g->members) other->client->Send(ipc::ReadyNotice{g->generation});
}

void Registry::Leave(const std::shared_ptr<Client>& c) {
  if (Group* g = Find(c->group)) {
    spdlog::info("rank {} (pid {}) left {}", c->rank, c->pid, g->Describe());
    int rank = c->rank;
    std::string name = c->group;
    c->group.clear();
    c->rank = -1;
    Release(*g, rank);
    MaybeDestroy(name);
  }
  c->Send(ipc::LeaveOk{});
  c->CloseAfterWrites();
}

void Registry::Abort(const std::shared_ptr<Client>& c, const ipc::AbortRequest& req) {
  Group* g = Find(c->group);
  if (g == nullptr) {
    c->Refuse(InvalidArgumentError("ABORT before JOIN"));
    return;
  }
  Fail(*g, RankAndPid(c->rank, c->pid) + " aborted: " + req.reason, ipc::kAbortRaised);
}

void Registry::Disconnected(const std::shared_ptr<Client>& c) {
  Group* g = Find(c->group);
  if (g == nullptr) return;
  int rank = c->rank;
  std::string name = c->group;
  c->group.clear();
  c->rank = -1;
  Fail(*g, RankAndPid(rank, c->pid) + " disconnected without leaving", ipc::kAbortMemberDied);
  Release(*g, rank);
  MaybeDestroy(name);
}

void Registry::Fail(Group& g, const std::string& reason, uint32_t abort_code) {
  ipc::GroupSegmentHeader* h = g.seg->header();
  uint32_t expected = ipc::kAbortNone;
  __atomic_compare_exchange_n(g.seg->abort_word(), &expected, abort_code, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  if (g.In(GroupState::kFailed)) return;
  ++version_;
  // The reason carries what a member sent: made valid UTF-8 and cut on a
  // character boundary, so whoever reads the field gets valid text.
  const std::string clean = SanitizeUtf8(reason);
  ipc::CopyField(h->failure_reason, sizeof(h->failure_reason),
                 Utf8Prefix(clean, sizeof(h->failure_reason) - 1));
  StoreRelease(&h->failed_unix_ms, ipc::NowUnixMs());
  StoreRelease(&h->state, static_cast<uint32_t>(GroupState::kFailed));
  spdlog::warn("{} FAILED: {}", g.Describe(), clean);
  const std::string notice(Utf8Prefix(clean, ipc::kMaxReasonBytes));
  for (auto& m : g.members) {
    if (m.has_value() && m->client) m->client->Send(ipc::GroupFailedNotice{notice});
  }
}

void Registry::Release(Group& g, int rank) {
  ++version_;
  g.members[static_cast<size_t>(rank)].reset();
  StoreRelease(&g.seg->header()->joined_pid[rank], 0);
}
void Registry::TickForming(Group& g, Clock::time_point now) {
  std::vector<int> absent, unpublished;
  for (int r = 0; r < g.world_size; ++r) {
    const auto& m = g.members[static_cast<size_t>(r)];
    if (!m.has_value()) {
      absent.push_back(r);
    } else if (!m->published) {
      unpublished.push_back(r);
    }
  }
  for (int r = 0; r < g.world_size; ++r) {
    auto& m = g.members[static_cast<size_t>(r)];
    if (!m.has_value() || !m->client || now < m->deadline) continue;
    std::string msg = g.Describe() + " not READY after " + std::to_string(m->timeout_ms) +
                      " ms: " + ipc::MissingRanksText(absent, unpublished);
    spdlog::warn("rank {} (pid {}) timed out: {}", r, m->pid, msg);
    std::shared_ptr<Client> c = m->client;
    c->group.clear();
    c->rank = -1;
    Release(g, r);
    c->Refuse(TimeoutError(msg));
  }
}

void Registry::Tick(Clock::time_point now) {
  std::vector<std::string> names;
  for (auto& [name, g] : groups_) names.push_back(name);
  for (const std::string& name : names) {
    Group* g = Find(name);
    if (g == nullptr) continue;
    if (g->adopted) {
      TickAdopted(*g);
    } else if (g->In(GroupState::kInit)) {
      TickForming(*g, now);
    }
    MaybeDestroy(name);
  }
}

}  // namespace qr::broker
