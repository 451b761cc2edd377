#include "ipc/broker/status_doc.h"

#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "common/utf8.h"
#include "common/version.h"
#include "ipc/group_types.h"
#include "ipc/names.h"
#include "ipc/wire.h"
#include "nlohmann/json.hpp"

namespace qr::broker {
namespace {

using Clock = std::chrono::steady_clock;
using ipc::GroupState;
using ipc::LoadAcquire;
using nlohmann::json;

constexpr std::chrono::milliseconds kStatusCacheAge{20};
constexpr std::chrono::milliseconds kStaleScanAge{1000};

// Text that is going into JSON, which must be UTF-8.
std::string Clean(std::string_view s) { return SanitizeUtf8(s); }

double SecondsSince(uint64_t unix_ms) {
  uint64_t now = ipc::NowUnixMs();
  return unix_ms == 0 || unix_ms > now ? 0.0 : static_cast<double>(now - unix_ms) / 1000.0;
}

bool SameTime(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

const char* BlobKindName(const ipc::MemberSlot& slot, bool published) {
  if (!published) return "none";
  if (slot.kind == static_cast<uint32_t>(ipc::BlobKind::kGpuIpcHandle)) return "gpu_ipc_handle";
  if (slot.kind == static_cast<uint32_t>(ipc::BlobKind::kHostSegment)) return "host_segment";
  return "none";
}

json MemberJson(const Group& g, int r, const Member& m, bool published) {
  const ipc::MemberSlot* slot = g.seg->slot(r);
  json ops = json::object(), bytes = json::object();
  for (int c = 0; c < ipc::kNumCounters; ++c) {
    ops[ipc::kCounterNames[c]] = __atomic_load_n(&slot->ops[c], __ATOMIC_RELAXED);
    bytes[ipc::kCounterNames[c]] = __atomic_load_n(&slot->bytes[c], __ATOMIC_RELAXED);
  }
  uint64_t progress = __atomic_load_n(&slot->last_progress_unix_ms, __ATOMIC_RELAXED);
  json member = {
      {"rank", r},
      {"pid", m.pid},
      {"alive", m.client != nullptr || g.seg->SlotHeld(r)},
      {"connected", m.client != nullptr},
      {"published", published},
      {"device", Clean(m.device)},
      {"blob_kind", BlobKindName(*slot, published)},
      {"ops", ops},
      {"bytes", bytes},
  };
  member["last_progress_s"] = progress == 0 ? json(nullptr) : json(SecondsSince(progress));
  return member;
}

// One group's entry; its problem (if any) is appended to `problems`.
json GroupJson(const Group& g, json& problems) {
  const ipc::GroupSegmentHeader* h = g.seg->header();
  uint32_t state = g.state();
  json group = {
      {"name", Clean(g.name)},
      {"generation", g.generation},
      {"world_size", g.world_size},
      {"state", ipc::GroupStateName(state)},
      {"segment", Clean(g.seg->name())},
      {"buffer_bytes", g.buffer_bytes},
      {"adopted", g.adopted},
      {"age_s", SecondsSince(h->created_unix_ms)},
      {"abort_word", LoadAcquire(g.seg->abort_word())},
  };
  const bool failed = state == static_cast<uint32_t>(GroupState::kFailed);
  if (failed) {
    // Written by whoever can write the segment, so checked here again.
    group["failure_reason"] = Clean(ipc::ReadField(h->failure_reason, sizeof(h->failure_reason)));
  }
  json members = json::array();
  std::vector<int> missing, attached;
  for (int r = 0; r < g.world_size; ++r) {
    const auto& m = g.members[static_cast<size_t>(r)];
    bool published = LoadAcquire(&g.seg->slot(r)->published) != 0;
    if (!m.has_value()) {
      missing.push_back(r);
      continue;
    }
    attached.push_back(r);
    members.push_back(MemberJson(g, r, *m, published));
  }
  group["members"] = members;
  group["missing_ranks"] = missing;
  if (failed) {
    problems.push_back({{"severity", "error"},
                        {"group", Clean(g.name)},
                        {"message", Clean(g.Describe()) +
                                        " FAILED: " + group["failure_reason"].get<std::string>()},
                        {"remedy",
                         "survivors get QR_PEER_FAILED and must call qr_leave (ranks still "
                         "attached: " +
                             ipc::RankList(attached) +
                             "); restart the job; the name "
                             "can be joined again once every member has left"}});
  } else if (state == static_cast<uint32_t>(GroupState::kInit) &&
             SecondsSince(h->created_unix_ms) > 5.0) {
    problems.push_back(
        {{"severity", "warning"},
         {"group", Clean(g.name)},
         {"message", Clean(g.Describe()) + " has waited " +
                         std::to_string(static_cast<int>(SecondsSince(h->created_unix_ms))) +
                         " s for ranks " + ipc::RankList(missing)},
         {"remedy",
          "start the missing ranks, or check that every rank uses the same group "
          "name and world size; joins time out after their join timeout"}});
  }
  return group;
}

}  // namespace

const std::string& StatusDocument::Get(const BrokerFacts& broker, const Registry& registry) {
  auto now = Clock::now();
  struct stat st {};
  bool shm_changed = ::stat("/dev/shm", &st) != 0 || !SameTime(st.st_mtim, shm_mtime_);
  if (doc_version_ != registry.version() || shm_changed || now - doc_time_ >= kStatusCacheAge) {
    doc_ = Build(broker, registry);
    doc_version_ = registry.version();
    doc_time_ = now;
  }
  return doc_;
}

const ipc::SweepResult& StatusDocument::StaleObjects(const std::set<std::string>& ours) {
  // The scan examines every object of this uid in /dev/shm. A holder that
  // died without removing anything shows up within kStaleScanAge.
  struct stat st {};
  bool have_mtime = ::stat("/dev/shm", &st) == 0;
  auto now = Clock::now();
  bool same_dir = have_mtime && SameTime(st.st_mtim, shm_mtime_);
  if (!stale_valid_ || !same_dir || now - stale_time_ >= kStaleScanAge) {
    stale_ = ipc::SweepStale(::getuid(), /*dry_run=*/true, ours);
    stale_time_ = now;
    shm_mtime_ = have_mtime ? st.st_mtim : timespec{};
    stale_valid_ = true;
  }
  return stale_;
}

std::string StatusDocument::Build(const BrokerFacts& broker, const Registry& registry) {
  json doc;
  doc["schema_version"] = 1;
  doc["broker"] = {
      {"pid", ::getpid()},
      {"uid", ::getuid()},
      {"uptime_s", std::chrono::duration<double>(Clock::now() - broker.started).count()},
      {"socket", Clean(broker.socket_path)},
      {"version", kVersion},
      {"protocol_version", ipc::kProtocolVersion},
      {"connections", broker.connections},
      {"max_connections", broker.max_connections},
      {"remembered_names", registry.remembered_names()},
      {"ended_names", registry.ended_names()},
  };
  json groups = json::array();
  json problems = json::array();
  std::set<std::string> ours;
  for (const auto& [name, g] : registry.groups()) {
    ours.insert(g->seg->name());
    groups.push_back(GroupJson(*g, problems));
  }
  doc["groups"] = groups;
  const ipc::SweepResult& stale = StaleObjects(ours);
  json stale_names = json::array();
  for (const auto& n : stale.removed) stale_names.push_back(Clean(n));
  doc["stale_objects"] = stale_names;
  if (!stale.removed.empty()) {
    problems.push_back({{"severity", "warning"},
                        {"group", nullptr},
                        {"message", std::to_string(stale.removed.size()) +
                                        " shared-memory objects in /dev/shm belong to dead "
                                        "processes"},
                        {"remedy", "run `qrctl gc`"}});
  }
  if (!stale.unknown.empty()) {
    json other = json::array();
    for (const auto& n : stale.unknown) other.push_back(Clean(n));
    doc["other_objects"] = other;
  }
  std::vector<std::string> foreign = ipc::ListForeignObjects(::getuid());
  json foreign_names = json::array();
  for (const auto& n : foreign) foreign_names.push_back(Clean(n));  // anyone can name these
  doc["foreign_objects"] = foreign_names;
  if (!foreign.empty()) {
    problems.push_back({{"severity", "warning"},
                        {"group", nullptr},
                        {"message", std::to_string(foreign.size()) +
                                        " objects in /dev/shm carry this user's prefix but are "
                                        "not ours (another owner or not mode 0600); they are "
                                        "ignored, never opened"},
                        {"remedy", "ask root to remove them (ls -l /dev/shm/" +
                                       ipc::UserPrefix(::getuid()).substr(1) + "*)"}});
  }
  doc["problems"] = problems;
  // Every string above is clean; replacing is the backstop that keeps a
  // missed one from throwing.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace qr::broker
