// Registry: the broker's groups and their state machine, apart from any
// transport, so that it is testable without sockets (registry_test.cc).
//
//   INIT ── every rank joined and published ──> READY
//     │                                           │
//     └── a member aborts, disconnects or dies ───┴──> FAILED
//
// A group is created by its first JOIN, with a group segment (ipc/segment.h)
// of a new generation; it ends, and its segment and data objects are
// removed, when its last member leaves or goes. A join that is not READY by
// its member's join timeout is refused (kTimeout, naming the missing ranks)
// and its rank freed. State lives in the segment (state word, abort word), so
// members see it without the broker.
//
// Adoption: a broker that starts finds the segments an earlier broker of the
// same socket left (ListUserObjects, the broker lock free) and takes them
// over. Their members have no connection to it; the registry watches them by
// their slot locks and `left` flags on each Tick. An adopted group that was
// still forming is failed (its members lost their broker mid-formation).
//
// In parts: the requests and the state machine (registry.cc), the rules of
// joining an existing group (join_checks.h), a group's segment from creation
// to removal and the memory of ended names (registry_lifetime.cc), and
// adoption (registry_adoption.cc).
//
// Clients are the registry's view of a connection: it sends replies and
// notices through them and records on them which rank they hold. Single-
// threaded, like the rest of the broker.
#ifndef QR_IPC_BROKER_REGISTRY_H_
#define QR_IPC_BROKER_REGISTRY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "ipc/segment.h"
#include "ipc/wire.h"

namespace qr::broker {

// A connection as the registry sees it (a Session in the broker).
class Client {
 public:
  virtual ~Client() = default;
  // Queues a reply or notice.
  virtual void Send(const ipc::Message& m) = 0;
  // Sends what is queued, then closes the connection.
  virtual void CloseAfterWrites() = 0;
  // An error reply, then the connection closes.
  void Refuse(const Status& status) {
    Send(ipc::ErrorReplyFor(status));
    CloseAfterWrites();
  }

  int32_t pid = 0;    // of the peer (SO_PEERCRED)
  std::string group;  // set, with rank, while this connection holds a rank
  int rank = -1;
};

struct Member {
  std::shared_ptr<Client> client;  // null for adopted groups
  int32_t pid = 0;
  std::string device;
  bool allow_shared_device = false;  // JoinRequest::allow_shared_device
  bool published = false;
  std::chrono::steady_clock::time_point deadline{};
  uint32_t timeout_ms = 0;
};

struct Group {
  std::string name;
  uint64_t generation = 0;
  int world_size = 0;
  uint64_t buffer_bytes = 0;
  std::unique_ptr<ipc::GroupSegment> seg;
  std::vector<std::optional<Member>> members;
  bool adopted = false;

  uint32_t state() const { return ipc::LoadAcquire(&seg->header()->state); }
  bool In(ipc::GroupState s) const { return state() == static_cast<uint32_t>(s); }
  bool Empty() const;
  std::string Describe() const;  // "group g (generation 3)"
};

struct RegistryOptions {
  std::string socket_path;  // written into new segments; only its groups are adopted
  // Group names whose last generation is remembered after their group ended
  // (so a re-formed group gets a new generation); the oldest are forgotten.
  size_t remembered_names = 4096;
};

class Registry {
 public:
  using Clock = std::chrono::steady_clock;
  using Groups = std::map<std::string, std::unique_ptr<Group>>;

  explicit Registry(RegistryOptions options) : options_(std::move(options)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Takes over the live groups an earlier broker of this socket left.
  void Adopt();

  // The requests of a connection. Each answers through `c`: JOIN_OK or an
  // error reply (which closes the connection), READY notices to every member
  // when the last one publishes, LEAVE_OK, GROUP_FAILED notices.
  void Join(const std::shared_ptr<Client>& c, const ipc::JoinRequest& req);
  void Published(const std::shared_ptr<Client>& c);
  void Leave(const std::shared_ptr<Client>& c);
  void Abort(const std::shared_ptr<Client>& c, const ipc::AbortRequest& req);
  // The connection ended: a member that did not leave fails its group.
  void Disconnected(const std::shared_ptr<Client>& c);

  // Refuses joins whose timeout passed, and watches adopted groups' members
  // by their locks; ends groups that emptied.
  void Tick(Clock::time_point now);

  // Drops every group without touching it (unmaps; the segments stay for
  // their members, for a later broker to adopt).
  void Clear() { groups_.clear(); }

  const Groups& groups() const { return groups_; }
  size_t remembered_names() const { return last_generation_.size(); }
  size_t ended_names() const { return ended_names_.size(); }
  // Bumped on every change to the groups, their members or their state.
  uint64_t version() const { return version_; }

 private:
  StatusOr<Group*> Create(const ipc::JoinRequest& req);
  void Fail(Group& g, const std::string& reason, uint32_t abort_code);
  void Release(Group& g, int rank);
  void MaybeDestroy(const std::string& name);
  Group* Find(const std::string& name);
  void TickAdopted(Group& g);
  void TickForming(Group& g, Clock::time_point now);
  // "rank 1 (pid 42)", as failure reasons name a member.
  static std::string RankAndPid(int rank, int32_t pid);

  RegistryOptions options_;
  Groups groups_;
  std::map<std::string, uint64_t> last_generation_;
  std::deque<std::string> ended_names_;  // names without a group, oldest first
  uint64_t version_ = 0;
};

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_REGISTRY_H_
