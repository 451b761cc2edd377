// GroupMembership: one rank's membership in a quickreduce group, formed
// through the local broker (qr-broker) and a POSIX shared-memory segment.
//
//   JoinParams p;
//   p.group = "tp0"; p.rank = r; p.world_size = 4;
//   p.device_id = "0000:1b:00.0";          // or kHostDeviceName for the host backend
//   p.buffer_bytes = geometry;             // must match across members
//   QR_ASSIGN_OR_RETURN(auto m, GroupMembership::Join(p));
//   QR_RETURN_IF_ERROR(m->PublishAndWaitReady(BlobKind::kGpuIpcHandle, handle));
//   for (const MemberInfo& peer : m->Members()) { ... open peer.blob ... }
//   ... data path polls *m->abort_word() and calls m->Check() ...
//   QR_RETURN_IF_ERROR(m->Leave());
//
// Lifecycle. Join connects to the broker (starting one when none answers and
// autostart is on; only one of many racing starters wins), sends JOIN and maps
// the group segment `/quickreduce-<uid>-<group>-<generation>` (0600). The
// member then writes its own slot (one writer per slot, no cross-process
// mutex) and tells the broker; when every rank has published, the broker marks
// the group READY. The broker connection stays open: when a member's
// connection ends without LEAVE the broker marks the group FAILED, raises the
// abort word and tells the survivors. A broker restart does not disturb a READY
// group: the abort word lives in shared memory, not in the connection.
//
// Watchdog. From READY until Leave a thread of each member tests the peers'
// slot locks every kWatchdogPeriod (F_OFD_GETLK; the kernel drops a dead
// process's lock at once). A peer whose lock is gone without its `left` flag
// has died: the watchdog raises the abort word (kAbortMemberDied), so every
// wait of either backend stops within a few ms, with or without a broker
// (the broker sees a death by its connection; after a broker restart, or with
// none at all, only the locks tell).
//
// Data objects. Shared-memory objects a member creates for its data (the host
// backend's receive buffers) must be named `<segment_name()>-<suffix>`, with
// suffix in [A-Za-z0-9._-]. When the group ends (all members left or died),
// the broker, a broker start-up sweep and `qrctl gc` remove the group segment
// and every `<segment_name()>-*` object whose owners are dead, so a crash never
// leaks /dev/shm.
#ifndef QR_IPC_GROUP_CLIENT_H_
#define QR_IPC_GROUP_CLIENT_H_

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "ipc/group_types.h"

namespace qr::ipc {

class GroupSegment;      // ipc/segment.h
class BrokerConnection;  // ipc/broker_client.h

inline constexpr std::chrono::milliseconds kWatchdogPeriod{10};

struct MemberInfo {
  int rank = -1;
  int32_t pid = 0;
  std::string device_id;
  BlobKind kind = BlobKind::kNone;
  std::array<uint8_t, kBlobBytes> blob{};
  uint64_t buffer_bytes = 0;
  uint64_t agreed = 0;  // JoinParams::agreed of that member
};

struct JoinParams {
  // Empty: $QR_BROKER_SOCKET, else $XDG_RUNTIME_DIR/quickreduce/broker.sock,
  // else /tmp/quickreduce-<uid>/broker.sock.
  std::string socket_path;
  std::string group;   // [A-Za-z0-9._-]{1,63}
  int rank = -1;       // [0, world_size)
  int world_size = 0;  // 2, 4 or 8
  // GPU PCI bus id / UUID (at most 63 bytes, printable); kHostDeviceName for the
  // host backend. Two members of one group may not name the same GPU unless
  // every member sets allow_shared_device.
  std::string device_id;
  // Agree to share device_id with other ranks (QR_ALLOW_SHARED_DEVICE, a
  // testing mode for one GPU under NVIDIA MPS).
  bool allow_shared_device = false;
  uint64_t buffer_bytes = 0;  // geometry: must match across members
  // Published in the slot for the caller to compare across members once the
  // group is READY (Members()); the broker does not look at it.
  uint64_t agreed = 0;
  // How long Join + PublishAndWaitReady may wait for the other ranks.
  std::chrono::milliseconds timeout{60000};
  // Start qr-broker when none answers. The binary is $QR_BROKER_BIN, else
  // `qr-broker` beside the running executable, in its Bazel runfiles, else
  // on $PATH (ipc/broker_binary.h).
  // Callers usually set this from $QR_BROKER_AUTOSTART (default on).
  bool autostart = true;
};

// Reads $QR_BROKER_AUTOSTART (default true). kInvalidArgument naming the
// variable for a bad value.
StatusOr<bool> AutostartFromEnv();

// One per joined rank. Thread-compatible: calls on one object need external
// synchronisation, except abort_word()/abort_page(), which any thread (or a
// GPU) may read at any time while the object lives.
class GroupMembership {
 public:
  // Validates p, connects (autostarting a broker if allowed; race-safe), sends
  // JOIN and maps the group segment. Errors: kInvalidArgument (bad params, or
  // the broker refused: world size / geometry mismatch), kAlreadyExists (rank
  // taken, GPU already in the group, group READY with all ranks),
  // kPeerFailed (the group FAILED and still has members), kUnavailable (no
  // broker and none could be started, or another uid's broker), kTimeout.
  [[nodiscard]] static StatusOr<std::unique_ptr<GroupMembership>> Join(const JoinParams& p);

  ~GroupMembership();  // Leave()s; errors are logged
  GroupMembership(const GroupMembership&) = delete;
  GroupMembership& operator=(const GroupMembership&) = delete;

  // Writes this rank's slot (pid, device, kind, blob, sizes), tells the
  // broker and waits until the group is READY. Errors: kTimeout (naming the
  // missing ranks) when the join timeout runs out, kPeerFailed if the group
  // failed meanwhile, kUnavailable if the broker went away, kInvalidArgument
  // for a second call.
  [[nodiscard]] Status PublishAndWaitReady(BlobKind kind,
                                           const std::array<uint8_t, kBlobBytes>& blob);

  // Every member's published slot, indexed by rank. Valid after READY (empty
  // before).
  std::vector<MemberInfo> Members() const;

  // The group's abort word: non-zero = the group failed or was aborted. It
  // sits at offset 0 of abort_page(), a page-aligned 4096-byte page of the
  // shared segment that a GPU backend may register with the GPU. Valid until
  // Leave() or destruction (unregister the page first); null after Leave().
  const volatile uint32_t* abort_word() const;
  void* abort_page() const;

  // Never blocks. OK while healthy; kPeerFailed (sticky) with the reason once
  // the abort word is raised or the broker reported the group FAILED.
  [[nodiscard]] Status Check();

  // Raises the abort word (the data path of every member stops) and tells the
  // broker, which marks the group FAILED. For a member that gave up, e.g. a
  // bounded wait timed out. `reason` is truncated to 127 bytes. Returns OK
  // even if the broker is gone (the word is in shared memory).
  [[nodiscard]] Status RaiseAbort(std::string_view reason);

  // Adds one op of `bytes` to this rank's counter `counter` (a qr_regime
  // value for two-shot calls, kOneShotCounter for one-shot ones; others are
  // ignored) and stamps last progress. Lock-free; only this member writes
  // its slot.
  void CountOp(int counter, uint64_t bytes);

  // Marks this slot as left, sends LEAVE, unmaps. Idempotent. Returns
  // kUnavailable if the broker could not be told (the slot's left flag still
  // lets the broker and qrctl gc clean up).
  [[nodiscard]] Status Leave();

  uint64_t generation() const { return generation_; }
  const std::string& segment_name() const { return segment_name_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // The pid of the broker that answered JOIN.
  int32_t broker_pid() const { return broker_pid_; }

 private:
  GroupMembership();
  Status WaitReady(std::chrono::steady_clock::time_point deadline);
  Status MissingRanksTimeout() const;
  void PollBroker();
  void StartWatchdog();
  void StopWatchdog();
  // In Leave, with no broker holding the segment.
  void RemoveIfLastOut();
  void WatchPeers();

  std::unique_ptr<BrokerConnection> conn_;
  std::unique_ptr<GroupSegment> segment_;
  std::string group_;
  std::string segment_name_;
  uint64_t generation_ = 0;
  int rank_ = -1;
  int world_size_ = 0;
  int32_t broker_pid_ = 0;
  std::chrono::steady_clock::time_point join_deadline_{};
  bool published_ = false;
  bool ready_ = false;
  bool left_ = false;
  bool broker_gone_ = false;
  Status failure_;  // sticky

  std::thread watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;   // guarded by watchdog_mu_
  std::string watchdog_reason_;  // guarded by watchdog_mu_; set once a peer died
};

}  // namespace qr::ipc

#endif  // QR_IPC_GROUP_CLIENT_H_
