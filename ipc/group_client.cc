#include "ipc/group_client.h"

#include <unistd.h>

#include <cstring>

#include "common/env_vars.h"
#include "common/limits.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "ipc/broker_client.h"
#include "ipc/gc.h"
#include "ipc/names.h"
#include "ipc/segment.h"

namespace qr::ipc {
namespace {

// The broker answers a join timeout itself; the client's own deadline is a
// little later so that the broker's answer (which names the missing ranks)
// normally wins, and a vanished broker still cannot hang the caller.
constexpr std::chrono::milliseconds kClientGrace{2000};

std::string Unexpected(const Message& m, const char* when) {
  return std::string("unexpected ") + MessageTypeName(static_cast<uint16_t>(TypeOf(m))) + " " +
         when;
}

}  // namespace

StatusOr<bool> AutostartFromEnv() { return kEnvBrokerAutostart.Bool(); }

GroupMembership::GroupMembership() = default;

GroupMembership::~GroupMembership() {
  Status s = Leave();
  if (!s.ok()) Log().warn("leaving group {}: {}", group_, s.ToString());
}

StatusOr<std::unique_ptr<GroupMembership>> GroupMembership::Join(const JoinParams& p) {
  QR_RETURN_IF_ERROR(ValidateName("group name", p.group));
  QR_RETURN_IF_ERROR(ValidateWorldSize(p.world_size));
  QR_RETURN_IF_ERROR(ValidateRank(p.rank, p.world_size));
  QR_RETURN_IF_ERROR(ValidateDeviceId(p.device_id));
  if (p.timeout.count() <= 0 || p.timeout > std::chrono::milliseconds(kMaxTimeoutMs)) {
    return InvalidArgumentError("join timeout must be 1 ms to 24 h");
  }
  QR_ASSIGN_OR_RETURN(std::string socket_path, ResolveSocketPath(p.socket_path));

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<GroupMembership> m(new GroupMembership());
  m->group_ = p.group;
  m->rank_ = p.rank;
  m->world_size_ = p.world_size;
  m->join_deadline_ = start + p.timeout + kClientGrace;
  // Connecting (and perhaps starting a broker) gets its own bound so a slow
  // start does not eat a short join timeout.
  auto connect_deadline =
      start + std::max<std::chrono::milliseconds>(p.timeout, std::chrono::milliseconds(10000));
  QR_ASSIGN_OR_RETURN(m->conn_,
                      BrokerConnection::ConnectOrStart(socket_path, p.autostart, connect_deadline));
  JoinRequest req;
  req.group = p.group;
  req.rank = static_cast<uint32_t>(p.rank);
  req.world_size = static_cast<uint32_t>(p.world_size);
  req.device_id = p.device_id;
  req.buffer_bytes = p.buffer_bytes;
  req.timeout_ms = static_cast<uint32_t>(p.timeout.count());
  req.allow_shared_device = p.allow_shared_device;
  QR_RETURN_IF_ERROR(m->conn_->Send(req));
  auto reply = m->conn_->Receive(m->join_deadline_);
  if (!reply.ok()) {
    m->left_ = true;  // nothing to leave
    return reply.status().WithContext("joining group " + p.group);
  }
  if (auto* e = std::get_if<ErrorReply>(&*reply)) {
    m->left_ = true;
    return StatusOf(*e);
  }
  auto* ok = std::get_if<JoinOk>(&*reply);
  if (ok == nullptr) {
    m->left_ = true;
    return InternalError(Unexpected(*reply, "in answer to JOIN"));
  }
  m->segment_name_ = ok->segment_name;
  m->generation_ = ok->generation;
  m->broker_pid_ = ok->broker_pid;
  auto seg = GroupSegment::Open(ok->segment_name);
  if (!seg.ok()) {
    m->left_ = true;
    return seg.status().WithContext("joining group " + p.group);
  }
  m->segment_ = std::move(*seg);
  // The slot lock is this member's liveness signal for the broker and gc.
  Status locked = m->segment_->LockSlot(p.rank);
  if (!locked.ok()) {
    Status s = m->Leave();
    (void)s;
    return locked.WithContext("joining group " + p.group);
  }
  GroupSegmentHeader* h = m->segment_->header();
  if (static_cast<int>(h->world_size) != p.world_size || h->generation != ok->generation) {
    // Leave() tells the broker so the rank is not held.
    Status s = m->Leave();
    (void)s;
    return InternalError("segment " + ok->segment_name + " does not match the broker's answer");
  }
  // Reset the slot first: a rank freed by an earlier member may be reused.
  MemberSlot* slot = m->segment_->slot(p.rank);
  StoreRelease(&slot->published, 0u);
  StoreRelease(&slot->left, 0u);
  slot->pid = ::getpid();
  CopyField(slot->device_id, sizeof(slot->device_id), p.device_id);
  slot->buffer_bytes = p.buffer_bytes;
  slot->agreed = p.agreed;
  return m;
}

Status GroupMembership::PublishAndWaitReady(BlobKind kind,
                                            const std::array<uint8_t, kBlobBytes>& blob) {
  if (left_) return InvalidArgumentError("PublishAndWaitReady after Leave");
  if (published_) return InvalidArgumentError("PublishAndWaitReady called twice");
  MemberSlot* slot = segment_->slot(rank_);
  slot->pid = ::getpid();
  slot->kind = static_cast<uint32_t>(kind);
  std::memcpy(slot->blob, blob.data(), kBlobBytes);
  slot->published_unix_ms = NowUnixMs();
  StoreRelease(&slot->published, 1u);
  published_ = true;
  QR_RETURN_IF_ERROR(conn_->Send(PublishedNotice{}).WithContext("publishing to the broker"));
  return WaitReady(join_deadline_);
}

Status GroupMembership::WaitReady(std::chrono::steady_clock::time_point deadline) {
  while (true) {
    auto msg = conn_->Receive(deadline);
    if (!msg.ok()) {
      if (msg.status().code() == StatusCode::kTimeout) return MissingRanksTimeout();
      if (LoadAcquire(abort_word()) != kAbortNone) return Check();
      return msg.status().WithContext("waiting for group " + group_ + " to become READY");
    }
    if (std::get_if<ReadyNotice>(&*msg) != nullptr) {
      ready_ = true;
      StartWatchdog();
      return OkStatus();
    }
    if (auto* f = std::get_if<GroupFailedNotice>(&*msg)) {
      failure_ = PeerFailedError("group " + group_ + " failed: " + SanitizeUtf8(f->reason));
      return failure_;
    }
    if (auto* e = std::get_if<ErrorReply>(&*msg)) {
      Status s = StatusOf(*e);
      if (s.code() == StatusCode::kPeerFailed) failure_ = s;
      if (s.code() == StatusCode::kTimeout) {
        // The broker freed our rank with its answer; the slot says so too,
        // and dropping the mapping releases the slot lock for a successor.
        StoreRelease(&segment_->slot(rank_)->left, 1u);
        left_ = true;
        segment_.reset();
        conn_.reset();
      }
      return s;
    }
    return InternalError(Unexpected(*msg, "while waiting for READY"));
  }
}

Status GroupMembership::MissingRanksTimeout() const {
  std::vector<int> absent, unpublished;
  const GroupSegmentHeader* h = segment_->header();
  for (int r = 0; r < world_size_; ++r) {
    if (LoadAcquire(&segment_->slot(r)->published) != 0) continue;
    (LoadAcquire(&h->joined_pid[r]) == 0 ? absent : unpublished).push_back(r);
  }
  return TimeoutError("group " + group_ +
                      " not READY in time: " + MissingRanksText(absent, unpublished));
}

std::vector<MemberInfo> GroupMembership::Members() const {
  std::vector<MemberInfo> out;
  if (!ready_ || segment_ == nullptr) return out;
  for (int r = 0; r < world_size_; ++r) {
    const MemberSlot* s = segment_->slot(r);
    MemberInfo info;
    info.rank = r;
    info.pid = s->pid;
    info.device_id = ReadField(s->device_id, sizeof(s->device_id));
    info.kind = static_cast<BlobKind>(s->kind);
    std::memcpy(info.blob.data(), s->blob, kBlobBytes);
    info.buffer_bytes = s->buffer_bytes;
    info.agreed = s->agreed;
    out.push_back(std::move(info));
  }
  return out;
}

const volatile uint32_t* GroupMembership::abort_word() const {
  return segment_ ? segment_->abort_word() : nullptr;
}

void* GroupMembership::abort_page() const { return segment_ ? segment_->abort_page() : nullptr; }

void GroupMembership::PollBroker() {
  if (broker_gone_ || conn_ == nullptr) return;
  while (true) {
    auto msg = conn_->Poll();
    if (!msg.ok()) {
      // A broker restart leaves a running group alone: the abort word, not the
      // connection, carries failures on the data path.
      broker_gone_ = true;
      Log().warn("group {}: lost the broker connection ({}); the group keeps running", group_,
                 msg.status().message());
      return;
    }
    if (!msg->has_value()) return;
    if (auto* f = std::get_if<GroupFailedNotice>(&**msg)) {
      if (failure_.ok())
        failure_ = PeerFailedError("group " + group_ + " failed: " + SanitizeUtf8(f->reason));
    }
  }
}

Status GroupMembership::Check() {
  if (!failure_.ok()) return failure_;
  if (segment_ == nullptr) return InvalidArgumentError("Check after Leave");
  uint32_t word = LoadAcquire(segment_->abort_word());
  if (word != kAbortNone) {
    const GroupSegmentHeader* h = segment_->header();
    std::string reason;
    if (LoadAcquire(&h->state) == static_cast<uint32_t>(GroupState::kFailed)) {
      reason = SanitizeUtf8(ReadField(h->failure_reason, sizeof(h->failure_reason)));
    }
    for (int r = 0; reason.empty() && r < world_size_; ++r) {
      // Any member can write its slot: its text is checked here.
      std::string why = SanitizeUtf8(
          ReadField(segment_->slot(r)->abort_reason, sizeof(MemberSlot::abort_reason)));
      if (!why.empty()) reason = "rank " + std::to_string(r) + " aborted: " + why;
    }
    if (reason.empty()) {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      reason = watchdog_reason_;
    }
    if (reason.empty()) reason = word == kAbortMemberDied ? "a member died" : "a member aborted";
    failure_ = PeerFailedError("group " + group_ + " failed: " + reason);
    return failure_;
  }
  PollBroker();
  return failure_;
}

Status GroupMembership::RaiseAbort(std::string_view reason) {
  if (segment_ == nullptr) return InvalidArgumentError("RaiseAbort after Leave");
  MemberSlot* slot = segment_->slot(rank_);
  // Cut on a character boundary: peers, the broker and qrctl read it as text.
  CopyField(slot->abort_reason, sizeof(slot->abort_reason),
            Utf8Prefix(reason, sizeof(slot->abort_reason) - 1));
  uint32_t expected = kAbortNone;
  __atomic_compare_exchange_n(segment_->abort_word(), &expected, kAbortRaised, false,
                              __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  if (failure_.ok()) {
    failure_ = PeerFailedError("group " + group_ + " aborted by rank " + std::to_string(rank_) +
                               ": " + std::string(reason));
  }
  if (!broker_gone_) {
    AbortRequest req;
    req.reason = std::string(Utf8Prefix(reason, kMaxReasonBytes));
    Status s = conn_->Send(req);
    if (!s.ok())
      Log().warn("group {}: could not tell the broker about the abort: {}", group_, s.message());
  }
  return OkStatus();
}

void GroupMembership::CountOp(int counter, uint64_t bytes) {
  static_assert(kNumCounters <= kMaxCounters);
  if (segment_ == nullptr || counter < 0 || counter >= kNumCounters) return;
  MemberSlot* slot = segment_->slot(rank_);
  __atomic_fetch_add(&slot->ops[counter], uint64_t{1}, __ATOMIC_RELAXED);
  __atomic_fetch_add(&slot->bytes[counter], bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->last_progress_unix_ms, NowUnixMs(), __ATOMIC_RELAXED);
}

void GroupMembership::StartWatchdog() {
  if (watchdog_.joinable()) return;
  watchdog_ = std::thread([this] { WatchPeers(); });
}

void GroupMembership::StopWatchdog() {
  if (!watchdog_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(watchdog_mu_);
    watchdog_stop_ = true;
  }
  watchdog_cv_.notify_all();
  watchdog_.join();
}

void GroupMembership::WatchPeers() {
  // Only segment_'s const lock tests and its shared words are used here; the
  // segment outlives this thread (StopWatchdog runs before it is unmapped).
  const GroupSegment& seg = *segment_;
  std::unique_lock<std::mutex> lock(watchdog_mu_);
  while (!watchdog_cv_.wait_for(lock, kWatchdogPeriod, [this] { return watchdog_stop_; })) {
    if (LoadAcquire(seg.abort_word()) != kAbortNone) return;  // already failing
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_ || seg.SlotHeld(r)) continue;
      // A member sets `left` before it drops its lock: no lock and no flag
      // means it died.
      const MemberSlot* slot = seg.slot(r);
      if (LoadAcquire(&slot->left) != 0) continue;
      watchdog_reason_ = "rank " + std::to_string(r) + " (pid " + std::to_string(slot->pid) +
                         ") died (its slot lock was released without leaving)";
      uint32_t expected = kAbortNone;
      __atomic_compare_exchange_n(seg.abort_word(), &expected, kAbortMemberDied, false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
      return;
    }
  }
}

Status GroupMembership::Leave() {
  StopWatchdog();
  if (left_) {
    segment_.reset();
    conn_.reset();
    return OkStatus();
  }
  left_ = true;
  if (segment_ != nullptr) StoreRelease(&segment_->slot(rank_)->left, 1u);
  Status result;
  if (conn_ != nullptr && !broker_gone_) {
    Status s = conn_->Send(LeaveRequest{});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (s.ok()) {
      auto msg = conn_->Receive(deadline);
      if (!msg.ok()) {
        s = msg.status();
        break;
      }
      if (std::get_if<LeaveOk>(&*msg) != nullptr) break;
      // READY / GROUP_FAILED may still be in flight before LEAVE_OK.
    }
    if (!s.ok()) result = UnavailableError("telling the broker we left: " + s.message());
  }
  if (segment_ != nullptr && !segment_->BrokerHeld()) RemoveIfLastOut();
  segment_.reset();
  conn_.reset();
  return result;
}

void GroupMembership::RemoveIfLastOut() {
  // No broker manages the group (it died and none adopted the segment), so no
  // sweep follows the group's end: the last member out removes the segment and
  // the dead members' data objects. Our `left` before the peers' flags: of
  // members leaving at once, at least the last sees every other flag.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  for (int r = 0; r < segment_->world_size(); ++r) {
    if (r != rank_ && segment_->SlotHeld(r) && LoadAcquire(&segment_->slot(r)->left) == 0) return;
  }
  Status s = RemoveGroupObjects(segment_->name());
  if (!s.ok()) Log().warn("group {}: {}", group_, s.ToString());
}

}  // namespace qr::ipc
