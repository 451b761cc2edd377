// A group's segment from its first JOIN to its end (registry.h): a new
// generation of the name, the segment and its data objects removed when the
// last member is gone, and the bounded memory of ended names' generations.
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "ipc/broker/registry.h"
#include "ipc/gc.h"
#include "ipc/names.h"
#include "spdlog/spdlog.h"

namespace qr::broker {

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

}  // namespace qr::broker
