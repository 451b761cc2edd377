#include "ipc/broker/registry.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

#include "common/utf8.h"
#include "ipc/gc.h"
#include "ipc/group_types.h"
#include "ipc/names.h"
#include "spdlog/spdlog.h"

namespace qr::broker {

using ipc::GroupState;
using ipc::LoadAcquire;
using ipc::StoreRelease;

namespace {

bool Is(uint32_t state, GroupState s) { return state == static_cast<uint32_t>(s); }

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
Status CheckJoinsExisting(const Group& g, const ipc::JoinRequest& req) {
  const uint32_t state = g.state();
  if (g.adopted) {
    return AlreadyExistsError(g.Describe() + " is " + ipc::GroupStateName(state) +
                              " and runs without the broker (adopted after a broker "
                              "restart); wait until its members leave");
  }
  if (Is(state, GroupState::kFailed)) {
    return PeerFailedError(g.Describe() + " FAILED (" +
                           ipc::ReadField(g.seg->header()->failure_reason, 256) +
                           "); the name can be joined again once all its members have left");
  }
  if (Is(state, GroupState::kReady)) {
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

std::string RankAndPid(int rank, int32_t pid) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
}

}  // namespace

bool Group::Empty() const {
  for (const auto& m : members) {
    if (m.has_value()) return false;
  }
  return true;
}

std::string Group::Describe() const {
  return "group " + name + " (generation " + std::to_string(generation) + ")";
}

Group* Registry::Find(const std::string& name) {
  if (name.empty()) return nullptr;
  auto it = groups_.find(name);
  return it == groups_.end() ? nullptr : it->second.get();
}

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
    if (Is(ref.state(), GroupState::kInit)) {
      Fail(ref, "the broker restarted while the group was forming", ipc::kAbortMemberDied);
    }
  }
}

StatusOr<Group*> Registry::Create(const ipc::JoinRequest& req) {
  auto group = std::make_unique<Group>();
  group->name = req.group;
  group->world_size = static_cast<int>(req.world_size);
  group->buffer_bytes = req.buffer_bytes;
  group->members.resize(static_cast<size_t>(group->world_size));
  // A name another object took (a stale one, or a planted one) costs a
  // generation, not the join.
  uint64_t gen = last_generation_[req.group];
  Status last_error;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    ++gen;
    auto nonce = ipc::RandomNonce();
    if (!nonce.ok()) {
      last_error = nonce.status();
      break;
    }
    ipc::GroupSegment::CreateParams p;
    p.name = ipc::SegmentName(::getuid(), req.group, gen, *nonce);
    p.group = req.group;
    p.world_size = group->world_size;
    p.generation = gen;
    p.buffer_bytes = req.buffer_bytes;
    p.socket_path = options_.socket_path;
    auto seg = ipc::GroupSegment::Create(p);
    if (seg.ok()) {
      group->seg = std::move(*seg);
      break;
    }
    last_error = seg.status();
    if (last_error.code() != StatusCode::kAlreadyExists) break;
  }
  if (group->seg == nullptr) {
    spdlog::error("cannot create a segment for group {}: {}", req.group, last_error.ToString());
    return last_error.WithContext("creating the segment of group " + req.group);
  }
  last_generation_[req.group] = gen;
  ++version_;
  group->generation = gen;
  spdlog::info("{} created for world size {} ({})", group->Describe(), group->world_size,
               group->seg->name());
  Group* g = group.get();
  groups_[req.group] = std::move(group);
  return g;
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
  if (!Is(g->state(), GroupState::kInit)) return;
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
  if (Is(g.state(), GroupState::kFailed)) return;
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

void Registry::MaybeDestroy(const std::string& name) {
  auto it = groups_.find(name);
  if (it == groups_.end() || !it->second->Empty()) return;
  std::string seg_name = it->second->seg->name();
  spdlog::info("{} ended; removing {} and its data objects", it->second->Describe(), seg_name);
  groups_.erase(it);
  ++version_;
  // One entry per name (a name formed and ended again moves to the back):
  // else a name reused forever grows the queue by one entry per generation
  // while the map it prunes never exceeds its bound.
  ended_names_.erase(std::remove(ended_names_.begin(), ended_names_.end(), name),
                     ended_names_.end());
  ended_names_.push_back(name);
  // Forget the generations of the names that ended longest ago (a name that
  // formed again since is skipped: its group holds it).
  while (last_generation_.size() > options_.remembered_names && !ended_names_.empty()) {
    std::string old = std::move(ended_names_.front());
    ended_names_.pop_front();
    if (groups_.count(old) == 0) last_generation_.erase(old);
  }
  Status s = ipc::RemoveGroupObjects(seg_name);
  if (!s.ok()) spdlog::warn("{}", s.ToString());
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
    } else if (Is(g->state(), GroupState::kInit)) {
      TickForming(*g, now);
    }
    MaybeDestroy(name);
  }
}

}  // namespace qr::broker
