#include "ipc/broker/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <vector>

#include <sys/resource.h>
#include <time.h>

#include "common/status_macros.h"
#include "common/syscall.h"
#include "common/utf8.h"
#include "ipc/gc.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "ipc/segment.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace qr::broker {

using ipc::GroupState;
using ipc::LoadAcquire;
using ipc::StoreRelease;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kCloseLinger{2};
constexpr size_t kMaxQueuedBytes = 4 << 20;
// A connection with this much unread reply is not read from until it drains:
// a peer pipelining STATUS gets its replies at the pace it reads them.
constexpr size_t kPauseReadingBytes = 256 << 10;
// Requests handled for one connection before the others get their turn.
constexpr int kRequestsPerTurn = 4;
// How long a status document and the /dev/shm scan behind it are reused.
constexpr std::chrono::milliseconds kStatusCacheAge{20};
constexpr std::chrono::milliseconds kStaleScanAge{1000};
constexpr int kWarningsPerSecond = 20;
// Descriptors kept free of connections: segments, the lock, the log, accept.
constexpr int kReservedFds = 64;

// Text that is going into JSON (which must be UTF-8) or into a log line.
std::string Clean(std::string_view s) { return SanitizeUtf8(s); }

double SecondsSince(uint64_t unix_ms) {
  uint64_t now = ipc::NowUnixMs();
  return unix_ms == 0 || unix_ms > now ? 0.0 : static_cast<double>(now - unix_ms) / 1000.0;
}

}  // namespace

// One client connection. Owned by Server::sessions_ until it is finished.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server* server, Socket socket, asio::io_context& io)
      : server_(server), socket_(std::move(socket)), linger_(io) {}

  void Start() { Read(); }

  void Send(const ipc::Message& m) {
    if (finished_ || closing_) return;
    auto frame = ipc::EncodeFrame(m);
    if (!frame.ok()) {
      // A reply the peer never gets would leave it waiting out its timeout:
      // it gets an error instead (ErrorReplyFor always encodes) and this
      // connection ends.
      spdlog::error("pid {}: cannot encode a {} reply: {}", pid,
                    ipc::MessageTypeName(static_cast<uint16_t>(ipc::TypeOf(m))),
                    Clean(frame.status().ToString()));
      frame = ipc::EncodeFrame(ipc::ErrorReplyFor(frame.status().WithContext(
          std::string("the broker could not encode its ") +
          ipc::MessageTypeName(static_cast<uint16_t>(ipc::TypeOf(m))) + " reply")));
      if (!frame.ok()) {
        Finish();
        return;
      }
      out_.push_back(std::move(*frame));
      queued_bytes_ += out_.back().size();
      if (!writing_) Write();
      CloseAfterWrites();
      return;
    }
    queued_bytes_ += frame->size();
    out_.push_back(std::move(*frame));
    // A peer that never reads must not grow the broker without bound.
    if (queued_bytes_ > kMaxQueuedBytes) {
      spdlog::warn("pid {}: {} bytes of replies unread; dropping the connection", pid,
                   queued_bytes_);
      // Finished later: the caller may be iterating over group members.
      closing_ = true;
      auto self = shared_from_this();
      asio::post(socket_.get_executor(), [self] { self->Finish(); });
      return;
    }
    if (!writing_) Write();
  }

  // Sends what is queued, then half-closes and drops what the peer still
  // sends until it closes (so the peer reads our last frame instead of a
  // reset), for at most kCloseLinger.
  void CloseAfterWrites() {
    if (finished_ || closing_) return;
    closing_ = true;
    auto self = shared_from_this();
    linger_.expires_after(kCloseLinger);
    linger_.async_wait([self](const std::error_code& ec) {
      if (!ec) self->Finish();
    });
    if (!writing_) HalfClose();
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    std::error_code ec;
    linger_.cancel();
    socket_.shutdown(Socket::shutdown_both, ec);
    socket_.close(ec);
    server_->CountClosed(uid);
    server_->OnDisconnect(shared_from_this());
  }

  // Ends the connection now, with one non-blocking try to tell the peer why.
  void SayAndFinish(const Status& why) {
    if (finished_) return;
    auto frame = ipc::EncodeFrame(ipc::ErrorReplyFor(why));
    if (frame.ok() && out_.empty()) {
      ssize_t n = ::send(socket_.native_handle(), frame->data(), frame->size(),
                         MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)n;
    }
    Finish();
  }

  Socket& socket() { return socket_; }
  bool finished() const { return finished_; }
  bool closing() const { return closing_; }
  // Whether this connection owes us the rest of a request, and since when it
  // has completed none.
  bool partial_frame() const { return !in_.empty(); }
  Clock::time_point last_request() const { return last_request_; }

  int32_t pid = 0;
  uint32_t uid = 0;
  std::string group;  // set while this connection holds a rank
  int rank = -1;

 private:
  void Read() {
    reading_ = true;
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(buf_), [self](const std::error_code& ec, size_t n) {
      self->reading_ = false;
      self->OnRead(ec, n);
    });
  }

  void OnRead(const std::error_code& ec, size_t n) {
    if (finished_) return;
    if (ec) {
      Finish();
      return;
    }
    if (closing_) {  // draining what the peer still sends
      Read();
      return;
    }
    in_.insert(in_.end(), buf_.data(), buf_.data() + n);
    Process();
  }

  // Handles up to kRequestsPerTurn complete requests, then yields to the
  // other connections; reads more only once the buffered ones are handled
  // and the peer has read most of its replies.
  void Process() {
    processing_ = false;
    if (finished_) return;
    if (closing_) {
      DrainOrRead();
      return;
    }
    auto self = shared_from_this();
    for (int handled = 0; !closing_ && !finished_; ++handled) {
      size_t consumed = 0;
      auto m = ipc::TryDecodeFrame(in_.data(), in_.size(), &consumed, ipc::kMaxRequestFrameBytes);
      if (!m.ok()) {
        if (server_->WarnBudget()) {
          spdlog::warn("pid {}: bad frame: {}", pid, Clean(m.status().ToString()));
        }
        Send(ipc::ErrorReplyFor(m.status()));
        CloseAfterWrites();
        break;
      }
      if (!m->has_value()) break;
      if (handled == kRequestsPerTurn || queued_bytes_ > kPauseReadingBytes) {
        Yield();
        return;
      }
      in_.erase(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(consumed));
      last_request_ = Clock::now();
      // No exception may leave the io_context: it would stop every group's
      // broker. One that escapes a handler ends this connection only.
      try {
        server_->OnMessage(self, std::move(**m));
      } catch (const std::exception& e) {
        spdlog::error("pid {}: a request failed with an exception: {}; dropping the connection",
                      pid, Clean(e.what()));
        Finish();
        return;
      }
    }
    DrainOrRead();
  }

  // Keeps one read outstanding: for the next request, or, once closing, to
  // see the peer's EOF (which ends the connection before kCloseLinger).
  void DrainOrRead() {
    if (!finished_ && !reading_) Read();
  }

  // Continues Process later: now if only the turn is over, after the next
  // write completes if the peer is behind on its replies.
  void Yield() {
    if (queued_bytes_ > kPauseReadingBytes) {
      resume_after_write_ = true;
      return;
    }
    if (processing_) return;
    processing_ = true;
    auto self = shared_from_this();
    asio::post(socket_.get_executor(), [self] { self->Process(); });
  }

  void Write() {
    writing_ = true;
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_.front()),
                      [self](const std::error_code& ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(const std::error_code& ec) {
    writing_ = false;
    if (finished_) return;
    if (ec) {
      Finish();
      return;
    }
    queued_bytes_ -= out_.front().size();
    out_.pop_front();
    if (!out_.empty()) {
      Write();
    } else if (closing_) {
      HalfClose();
    }
    if (resume_after_write_ && queued_bytes_ <= kPauseReadingBytes / 2) {
      resume_after_write_ = false;
      Yield();
    }
  }

  void HalfClose() {
    std::error_code ec;
    socket_.shutdown(Socket::shutdown_send, ec);
  }

  Server* server_;
  Socket socket_;
  asio::steady_timer linger_;
  // Requests are small (kMaxRequestFrameBytes): an idle connection costs
  // little more than this buffer.
  std::array<uint8_t, 1024> buf_{};
  std::vector<uint8_t> in_;
  std::deque<std::vector<uint8_t>> out_;
  size_t queued_bytes_ = 0;
  Clock::time_point last_request_ = Clock::now();
  bool reading_ = false;
  bool processing_ = false;
  bool resume_after_write_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool finished_ = false;
};

struct Member {
  std::shared_ptr<Session> session;  // null for adopted groups
  int32_t pid = 0;
  std::string device;
  bool allow_shared_device = false;  // JoinRequest::allow_shared_device
  bool published = false;
  Clock::time_point deadline{};
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

  uint32_t state() const { return LoadAcquire(&seg->header()->state); }
  bool Empty() const {
    for (const auto& m : members) {
      if (m.has_value()) return false;
    }
    return true;
  }
  std::string Describe() const {
    return "group " + name + " (generation " + std::to_string(generation) + ")";
  }
};

namespace {

// Two ranks on one GPU only when every GPU member of the group, `req`
// included, asked for it (QR_ALLOW_SHARED_DEVICE): a testing mode in which
// every rank caps its grids so the kernels sharing a GPU fit on it together.
Status CheckSharedDevice(const Group& g, const ipc::JoinRequest& req) {
  if (req.device_id == ipc::kDeviceHost) return OkStatus();
  int same = -1;  // a member on req's device
  bool shared = false;
  std::vector<int> unwilling;
  std::set<std::string> devices;
  for (int r = 0; r < g.world_size; ++r) {
    const auto& m = g.members[static_cast<size_t>(r)];
    if (!m.has_value() || m->device == ipc::kDeviceHost) continue;
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

}  // namespace

Server::Server(asio::io_context& io, ServerOptions options)
    : io_(io),
      options_(std::move(options)),
      acceptor_(io),
      signals_(io),
      timer_(io),
      timer_accept_(io),
      started_(Clock::now()) {}

Server::~Server() { Stop(); }

StatusOr<std::unique_ptr<Server>> Server::Start(asio::io_context& io, ServerOptions options) {
  std::unique_ptr<Server> server(new Server(io, std::move(options)));
  QR_RETURN_IF_ERROR(server->Listen());
  server->Accept();
  server->Tick();
  return server;
}

Status Server::Listen() {
  const std::string& path = options_.socket_path;
  QR_RETURN_IF_ERROR(ipc::CheckRuntimeDirectory(path, /*create=*/true));
  std::string lock_path = ipc::LockPathFor(path);
  QR_ASSIGN_OR_RETURN(int raw, SysCall("open " + lock_path, [&] {
                        return ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                      }));
  lock_fd_.reset(raw);
  if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return AlreadyExistsError("another broker is running for " + path + " (it holds " +
                                lock_path + ")");
    }
    return ErrnoToStatus(errno, "flock " + lock_path);
  }

  // We hold the lock, so any socket file there is a dead broker's.
  ::unlink(path.c_str());

  // Connections must run out before descriptors do, or accept fails and
  // nobody gets an answer.
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    if (lim.rlim_cur < lim.rlim_max) {
      rlimit raised = lim;
      raised.rlim_cur = lim.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    rlim_t usable = lim.rlim_cur > static_cast<rlim_t>(2 * kReservedFds)
                        ? lim.rlim_cur - static_cast<rlim_t>(kReservedFds)
                        : lim.rlim_cur / 2;
    max_connections_ =
        static_cast<int>(std::min<rlim_t>(usable, static_cast<rlim_t>(options_.max_connections)));
  } else {
    max_connections_ = options_.max_connections;
  }
  ipc::SweepResult sweep = ipc::SweepStale(::getuid(), /*dry_run=*/false);
  for (const auto& name : sweep.removed) spdlog::info("removed stale shm object {}", name);
  for (const auto& err : sweep.errors) spdlog::warn("could not remove {}", err);
  Adopt();

  std::error_code ec;
  asio::local::stream_protocol::endpoint ep(path);
  acceptor_.open(ep.protocol(), ec);
  if (ec) return InternalError("socket: " + ec.message());
  // umask, not chmod after bind, so the socket is never briefly open to others.
  mode_t old = ::umask(0177);
  acceptor_.bind(ep, ec);
  ::umask(old);
  if (ec) return UnavailableError("bind " + path + ": " + ec.message());
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return InternalError("listen " + path + ": " + ec.message());
  struct stat st {};
  QR_SYS_RETURN_IF_ERROR(::lstat(path.c_str(), &st));
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  listening_ = true;
  spdlog::info("qr-broker {} (protocol {}) pid {} listening on {} (at most {} connections)",
               kBrokerVersion, ipc::kProtocolVersion, ::getpid(), Clean(path), max_connections_);
  return OkStatus();
}

void Server::Adopt() {
  for (const std::string& name : ipc::ListUserObjects(::getuid())) {
    auto seg = ipc::GroupSegment::Open(name);
    if (!seg.ok()) continue;
    ipc::SegmentHeader* h = (*seg)->header();
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
    std::string key = g->name;
    Group& ref = *g;
    groups_[key] = std::move(g);
    // Its members lost their connections with the old broker mid-formation.
    if (ref.state() == static_cast<uint32_t>(GroupState::kInit)) {
      Fail(ref, "the broker restarted while the group was forming", ipc::kAbortMemberDied);
    }
  }
}

void Server::StopOnSignals() {
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.async_wait([this](const std::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: shutting down; running groups are left alone", sig);
    Stop();
  });
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::error_code ec;
  acceptor_.close(ec);
  signals_.cancel(ec);
  timer_.cancel();
  timer_accept_.cancel();
  std::vector<std::shared_ptr<Session>> all;
  for (auto& [ptr, s] : sessions_) all.push_back(s);
  for (auto& s : all) s->Finish();
  sessions_.clear();
  groups_.clear();  // unmaps; the segments stay for the members
  // Only the lock holder owns the socket path, and only while the path still
  // leads to the socket it bound: a broker that lost the start race, or whose
  // directory was removed and made again for a successor, must not unlink the
  // successor's socket.
  if (listening_ && StillOurSocket()) ::unlink(options_.socket_path.c_str());
  lock_fd_.reset();
}

bool Server::StillOurSocket() const {
  struct stat st {};
  return ::lstat(options_.socket_path.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
         st.st_ino == socket_ino_;
}

bool Server::WarnBudget() {
  auto now = Clock::now();
  if (now - warn_window_ >= std::chrono::seconds(1)) {
    if (warnings_suppressed_ > 0) {
      spdlog::warn("{} similar warnings suppressed in the last second", warnings_suppressed_);
    }
    warn_window_ = now;
    warnings_in_window_ = 0;
    warnings_suppressed_ = 0;
  }
  if (warnings_in_window_ < kWarningsPerSecond) {
    ++warnings_in_window_;
    return true;
  }
  ++warnings_suppressed_;
  return false;
}

void Server::CountClosed(uint32_t uid) {
  auto it = connections_per_uid_.find(uid);
  if (it != connections_per_uid_.end() && --it->second <= 0) connections_per_uid_.erase(it);
}

bool Server::AdmitConnection(Socket& socket, uint32_t uid, int32_t pid) {
  const bool ours = uid == ::getuid();
  const int per_uid = ours ? options_.max_connections_per_uid
                           : std::min(options_.max_connections_per_uid, kMaxForeignConnections);
  auto count = [&] {
    auto it = connections_per_uid_.find(uid);
    return it == connections_per_uid_.end() ? 0 : it->second;
  };
  // At a limit, our own uid's new connection takes the place of those that
  // have gone longest without a request and hold no rank: idle connections
  // cannot lock out a client that is about to join. A sixteenth of the limit
  // goes at once, so a flood costs one scan per many accepts.
  const bool total_full = static_cast<int>(sessions_.size()) >= max_connections_;
  if (ours && (total_full || count() >= per_uid)) {
    const int limit = total_full ? max_connections_ : per_uid;
    std::vector<std::shared_ptr<Session>> idle;
    for (auto& [ptr, s] : sessions_) {
      if (s->finished() || !s->group.empty() || (!total_full && s->uid != uid)) continue;
      idle.push_back(s);
    }
    size_t n = std::min(idle.size(), static_cast<size_t>(std::max(1, limit / 16)));
    std::nth_element(idle.begin(), idle.begin() + static_cast<ptrdiff_t>(n), idle.end(),
                     [](const auto& a, const auto& b) { return a->last_request() < b->last_request(); });
    std::string why = "the broker is at its limit of " + std::to_string(limit) +
                      (total_full ? " connections" : " connections per uid") +
                      " and this one had been idle longest";
    if (n > 0 && WarnBudget()) spdlog::warn("dropping {} idle connections: {}", n, why);
    for (size_t i = 0; i < n; ++i) idle[i]->SayAndFinish(UnavailableError(why));
  }
  std::string why;
  if (static_cast<int>(sessions_.size()) >= max_connections_) {
    why = "the broker has its limit of " + std::to_string(max_connections_) +
          " connections open, all of group members; try again later";
  } else if (count() >= per_uid) {
    why = ours ? "uid " + std::to_string(uid) + " has its limit of " + std::to_string(per_uid) +
                     " broker connections open, all of group members; try again later"
               : "this broker serves uid " + std::to_string(::getuid()) + " only";
  }
  if (why.empty()) {
    ++connections_per_uid_[uid];
    return true;
  }
  if (WarnBudget()) spdlog::warn("refused a connection of pid {} uid {}: {}", pid, uid, why);
  // One try to say why, without waiting: the socket is new, its send buffer
  // empty, so a small frame goes out whole or not at all.
  auto frame = ipc::EncodeFrame(ipc::ErrorReplyFor(UnavailableError(why)));
  if (frame.ok()) {
    ssize_t n = ::send(socket.native_handle(), frame->data(), frame->size(),
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)n;
  }
  std::error_code ec;
  socket.close(ec);
  return false;
}

void Server::Accept() {
  acceptor_.async_accept([this](const std::error_code& ec, Socket socket) {
    if (stopped_) return;
    if (ec) {
      // Out of descriptors, typically: pause instead of spinning on the error.
      spdlog::warn("accept: {}", ec.message());
      timer_accept_.expires_after(std::chrono::milliseconds(100));
      timer_accept_.async_wait([this](const std::error_code& wait_ec) {
        if (!wait_ec && !stopped_) Accept();
      });
      return;
    } else {
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        spdlog::warn("SO_PEERCRED: {}", std::strerror(errno));
        cred.uid = static_cast<uid_t>(-1);
      }
      if (!AdmitConnection(socket, cred.uid, cred.pid)) {
        Accept();
        return;
      }
      auto s = std::make_shared<Session>(this, std::move(socket), io_);
      s->pid = cred.pid;
      s->uid = cred.uid;
      sessions_[s.get()] = s;
      s->Start();
      if (cred.uid != ::getuid()) {
        if (WarnBudget()) {
          spdlog::warn("refused pid {} of uid {}: this broker serves uid {}", cred.pid, cred.uid,
                       ::getuid());
        }
        Refuse(s, UnavailableError("this broker serves uid " + std::to_string(::getuid()) +
                                   " only; uid " + std::to_string(cred.uid) +
                                   " must run its own broker"));
      }
    }
    Accept();
  });
}

void Server::CheckIdleSessions(Clock::time_point now) {
  std::vector<std::shared_ptr<Session>> idle;
  for (auto& [ptr, s] : sessions_) {
    if (s->finished() || s->closing()) continue;
    // A member waits on its connection for as long as its group runs; only
    // half a frame from it is owed.
    bool owes = s->group.empty() || s->partial_frame();
    if (owes && now - s->last_request() > options_.request_timeout) idle.push_back(s);
  }
  for (auto& s : idle) {
    if (WarnBudget()) {
      spdlog::warn("pid {}: no complete request in {} ms; dropping the connection", s->pid,
                   options_.request_timeout.count());
    }
    s->Finish();
  }
}

void Server::CapLog() {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) <= options_.max_log_bytes) {
    return;
  }
  // The log is whatever file stderr is (the autostart log beside the
  // socket); it is rotated by its name if it still has one, else emptied.
  char target[4096];
  ssize_t n = ::readlink("/proc/self/fd/2", target, sizeof(target) - 1);
  bool rotated = false;
  if (n > 0) {
    target[n] = '\0';
    std::string path(target);
    struct stat by_name {};
    if (::lstat(path.c_str(), &by_name) == 0 && by_name.st_ino == st.st_ino &&
        by_name.st_dev == st.st_dev && ::rename(path.c_str(), (path + ".1").c_str()) == 0) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
        rotated = true;
      }
    }
  }
  if (!rotated && ::ftruncate(STDERR_FILENO, 0) != 0) return;
  spdlog::info("log {} after reaching {} bytes", rotated ? "rotated to <log>.1" : "emptied",
               st.st_size);
}

void Server::Tick() {
  if (stopped_) return;
  auto now = Clock::now();
  if (!StillOurSocket()) {
    spdlog::warn("{} is no longer the socket this broker bound (its directory was removed, or "
                 "another broker serves it now); stopping, groups are left running",
                 Clean(options_.socket_path));
    Stop();
    return;
  }
  CheckIdleSessions(now);
  CapLog();
  std::vector<std::string> names;
  for (auto& [name, g] : groups_) names.push_back(name);
  for (const std::string& name : names) {
    auto it = groups_.find(name);
    if (it == groups_.end()) continue;
    Group& g = *it->second;
    if (g.adopted) {
      for (int r = 0; r < g.world_size; ++r) {
        auto& m = g.members[static_cast<size_t>(r)];
        if (!m.has_value()) continue;
        if (LoadAcquire(&g.seg->slot(r)->left) != 0) {
          Release(g, r);
        } else if (!g.seg->SlotHeld(r)) {
          Fail(g, "rank " + std::to_string(r) + " (pid " + std::to_string(m->pid) + ") died",
               ipc::kAbortMemberDied);
          Release(g, r);
        }
      }
    } else if (g.state() == static_cast<uint32_t>(GroupState::kInit)) {
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
        if (!m.has_value() || !m->session || now < m->deadline) continue;
        std::string msg = g.Describe() + " not READY after " + std::to_string(m->timeout_ms) +
                          " ms: " + ipc::MissingRanksText(absent, unpublished);
        spdlog::warn("rank {} (pid {}) timed out: {}", r, m->pid, msg);
        std::shared_ptr<Session> s = m->session;
        s->group.clear();
        s->rank = -1;
        Release(g, r);
        Refuse(s, TimeoutError(msg));
      }
    }
    MaybeDestroy(name);
  }
  timer_.expires_after(options_.tick);
  timer_.async_wait([this](const std::error_code& ec) {
    if (!ec) Tick();
  });
}

void Server::Refuse(const std::shared_ptr<Session>& s, const Status& status) {
  s->Send(ipc::ErrorReplyFor(status));
  s->CloseAfterWrites();
}

void Server::OnMessage(const std::shared_ptr<Session>& s, ipc::Message m) {
  if (stopped_) return;
  if (auto* join = std::get_if<ipc::JoinRequest>(&m)) {
    HandleJoin(s, *join);
  } else if (std::holds_alternative<ipc::PublishedNotice>(m)) {
    HandlePublished(s);
  } else if (std::holds_alternative<ipc::LeaveRequest>(m)) {
    HandleLeave(s);
  } else if (auto* abort = std::get_if<ipc::AbortRequest>(&m)) {
    HandleAbort(s, *abort);
  } else if (std::holds_alternative<ipc::StatusRequest>(m)) {
    const std::string& json = StatusJson();
    for (size_t off = 0; off == 0 || off < json.size(); off += ipc::kMaxStatusPieceBytes) {
      ipc::StatusReply piece;
      piece.json = json.substr(off, ipc::kMaxStatusPieceBytes);
      piece.more = off + ipc::kMaxStatusPieceBytes < json.size();
      s->Send(piece);
    }
  } else {
    Refuse(s, InvalidArgumentError(
                  std::string(ipc::MessageTypeName(static_cast<uint16_t>(ipc::TypeOf(m)))) +
                  " is a broker-to-client message"));
  }
}

void Server::HandleJoin(const std::shared_ptr<Session>& s, const ipc::JoinRequest& req) {
  if (!s->group.empty()) {
    Refuse(s, InvalidArgumentError("this connection already holds rank " + std::to_string(s->rank) +
                                   " of group " + s->group));
    return;
  }
  const int rank = static_cast<int>(req.rank);
  const int ws = static_cast<int>(req.world_size);
  auto it = groups_.find(req.group);
  Group* g = it == groups_.end() ? nullptr : it->second.get();
  if (g != nullptr) {
    uint32_t state = g->state();
    if (g->adopted) {
      Refuse(s, AlreadyExistsError(g->Describe() + " is " + ipc::GroupStateName(state) +
                                   " and runs without the broker (adopted after a broker "
                                   "restart); wait until its members leave"));
      return;
    }
    if (state == static_cast<uint32_t>(GroupState::kFailed)) {
      Refuse(s, PeerFailedError(g->Describe() + " FAILED (" +
                                ipc::ReadField(g->seg->header()->failure_reason, 256) +
                                "); the name can be joined again once all its members have left"));
      return;
    }
    if (state == static_cast<uint32_t>(GroupState::kReady)) {
      Refuse(s, AlreadyExistsError(g->Describe() + " is READY with all " +
                                   std::to_string(g->world_size) + " ranks"));
      return;
    }
    if (ws != g->world_size) {
      Refuse(s, InvalidArgumentError("world size " + std::to_string(ws) + " does not match " +
                                     g->Describe() + "'s world size " +
                                     std::to_string(g->world_size)));
      return;
    }
    if (req.buffer_bytes != g->buffer_bytes) {
      Refuse(s, InvalidArgumentError("buffer geometry " + std::to_string(req.buffer_bytes) +
                                     " bytes does not match " + g->Describe() + "'s " +
                                     std::to_string(g->buffer_bytes) + " bytes"));
      return;
    }
    const auto& holder = g->members[static_cast<size_t>(rank)];
    if (holder.has_value()) {
      Refuse(s, AlreadyExistsError("rank " + std::to_string(rank) + " of " + g->Describe() +
                                   " is taken by pid " + std::to_string(holder->pid)));
      return;
    }
    if (Status shared = CheckSharedDevice(*g, req); !shared.ok()) {
      Refuse(s, shared);
      return;
    }
  } else {
    auto group = std::make_unique<Group>();
    group->name = req.group;
    group->world_size = ws;
    group->buffer_bytes = req.buffer_bytes;
    group->members.resize(static_cast<size_t>(ws));
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
      p.world_size = ws;
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
      Refuse(s, last_error.WithContext("creating the segment of group " + req.group));
      return;
    }
    last_generation_[req.group] = gen;
    ++state_version_;
    group->generation = gen;
    spdlog::info("{} created for world size {} ({})", group->Describe(), ws, group->seg->name());
    g = group.get();
    groups_[req.group] = std::move(group);
  }
  Member m;
  m.session = s;
  m.pid = s->pid;
  m.device = req.device_id;
  m.allow_shared_device = req.allow_shared_device;
  m.timeout_ms = req.timeout_ms;
  m.deadline = Clock::now() + std::chrono::milliseconds(req.timeout_ms);
  g->members[static_cast<size_t>(rank)] = std::move(m);
  ++state_version_;
  StoreRelease(&g->seg->header()->joined_pid[rank], static_cast<int32_t>(s->pid));
  s->group = req.group;
  s->rank = rank;
  spdlog::info("pid {} joined {} as rank {}/{} on device {}", s->pid, g->Describe(), rank, ws,
               req.device_id);
  s->Send(ipc::JoinOk{g->seg->name(), g->generation, req.rank, static_cast<int32_t>(::getpid())});
}

void Server::HandlePublished(const std::shared_ptr<Session>& s) {
  auto it = groups_.find(s->group);
  if (s->group.empty() || it == groups_.end()) {
    Refuse(s, InvalidArgumentError("PUBLISHED before JOIN"));
    return;
  }
  Group& g = *it->second;
  auto& m = g.members[static_cast<size_t>(s->rank)];
  const ipc::MemberSlot* slot = g.seg->slot(s->rank);
  if (LoadAcquire(&slot->published) == 0) {
    Refuse(s, InvalidArgumentError("PUBLISHED but slot " + std::to_string(s->rank) + " of " +
                                   g.Describe() + " is not published"));
    return;
  }
  m->published = true;
  ++state_version_;
  if (g.state() != static_cast<uint32_t>(GroupState::kInit)) return;
  for (const auto& other : g.members) {
    if (!other.has_value() || !other->published) return;
  }
  ipc::SegmentHeader* h = g.seg->header();
  StoreRelease(&h->ready_unix_ms, ipc::NowUnixMs());
  StoreRelease(&h->state, static_cast<uint32_t>(GroupState::kReady));
  spdlog::info("{} is READY", g.Describe());
  for (auto& other : g.members) other->session->Send(ipc::ReadyNotice{g.generation});
}

void Server::HandleLeave(const std::shared_ptr<Session>& s) {
  auto it = groups_.find(s->group);
  if (!s->group.empty() && it != groups_.end()) {
    Group& g = *it->second;
    spdlog::info("rank {} (pid {}) left {}", s->rank, s->pid, g.Describe());
    int rank = s->rank;
    std::string name = s->group;
    s->group.clear();
    s->rank = -1;
    Release(g, rank);
    MaybeDestroy(name);
  }
  s->Send(ipc::LeaveOk{});
  s->CloseAfterWrites();
}

void Server::HandleAbort(const std::shared_ptr<Session>& s, const ipc::AbortRequest& req) {
  auto it = groups_.find(s->group);
  if (s->group.empty() || it == groups_.end()) {
    Refuse(s, InvalidArgumentError("ABORT before JOIN"));
    return;
  }
  Fail(*it->second,
       "rank " + std::to_string(s->rank) + " (pid " + std::to_string(s->pid) +
           ") aborted: " + req.reason,
       ipc::kAbortRaised);
}

void Server::Fail(Group& g, const std::string& reason, uint32_t abort_code) {
  ipc::SegmentHeader* h = g.seg->header();
  uint32_t expected = ipc::kAbortNone;
  __atomic_compare_exchange_n(g.seg->abort_word(), &expected, abort_code, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  if (g.state() == static_cast<uint32_t>(GroupState::kFailed)) return;
  ++state_version_;
  // The reason carries what a member sent: made valid UTF-8 and cut on a
  // character boundary, so whoever reads the field gets valid text.
  const std::string clean = Clean(reason);
  ipc::CopyField(h->failure_reason, sizeof(h->failure_reason),
                 Utf8Prefix(clean, sizeof(h->failure_reason) - 1));
  StoreRelease(&h->failed_unix_ms, ipc::NowUnixMs());
  StoreRelease(&h->state, static_cast<uint32_t>(GroupState::kFailed));
  spdlog::warn("{} FAILED: {}", g.Describe(), clean);
  const std::string notice(Utf8Prefix(clean, ipc::kMaxReasonBytes));
  for (auto& m : g.members) {
    if (m.has_value() && m->session) m->session->Send(ipc::GroupFailedNotice{notice});
  }
}

void Server::Release(Group& g, int rank) {
  ++state_version_;
  g.members[static_cast<size_t>(rank)].reset();
  StoreRelease(&g.seg->header()->joined_pid[rank], 0);
}

void Server::MaybeDestroy(const std::string& name) {
  auto it = groups_.find(name);
  if (it == groups_.end() || !it->second->Empty()) return;
  std::string seg_name = it->second->seg->name();
  spdlog::info("{} ended; removing {} and its data objects", it->second->Describe(), seg_name);
  groups_.erase(it);
  ++state_version_;
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

void Server::OnDisconnect(const std::shared_ptr<Session>& s) {
  sessions_.erase(s.get());
  if (stopped_ || s->group.empty()) return;
  auto it = groups_.find(s->group);
  if (it == groups_.end()) return;
  Group& g = *it->second;
  int rank = s->rank;
  std::string name = s->group;
  s->group.clear();
  s->rank = -1;
  Fail(g,
       "rank " + std::to_string(rank) + " (pid " + std::to_string(s->pid) +
           ") disconnected without leaving",
       ipc::kAbortMemberDied);
  Release(g, rank);
  MaybeDestroy(name);
}

const std::string& Server::StatusJson() {
  // A burst of STATUS requests (qrctl --watch from many terminals, or a peer
  // pipelining them) shares one document while nothing changed.
  auto now = Clock::now();
  struct stat st {};
  bool shm_changed = ::stat("/dev/shm", &st) != 0 ||
                     st.st_mtim.tv_sec != stale_cache_mtime_.tv_sec ||
                     st.st_mtim.tv_nsec != stale_cache_mtime_.tv_nsec;
  if (status_cache_version_ != state_version_ || shm_changed ||
      now - status_cache_time_ >= kStatusCacheAge) {
    status_cache_ = BuildStatusJson();
    status_cache_version_ = state_version_;
    status_cache_time_ = now;
  }
  return status_cache_;
}

const ipc::SweepResult& Server::StaleObjects(const std::set<std::string>& ours) {
  // The scan examines every object of this uid in /dev/shm; it is repeated
  // when /dev/shm changed (an object came or went) or has aged, not per
  // STATUS. A holder that died without removing anything shows up within
  // kStaleScanAge.
  struct stat st {};
  bool have_mtime = ::stat("/dev/shm", &st) == 0;
  auto now = Clock::now();
  bool same_dir = have_mtime && st.st_mtim.tv_sec == stale_cache_mtime_.tv_sec &&
                  st.st_mtim.tv_nsec == stale_cache_mtime_.tv_nsec;
  if (!stale_cache_valid_ || !same_dir || now - stale_cache_time_ >= kStaleScanAge) {
    stale_cache_ = ipc::SweepStale(::getuid(), /*dry_run=*/true, ours);
    stale_cache_time_ = now;
    stale_cache_mtime_ = have_mtime ? st.st_mtim : timespec{};
    stale_cache_valid_ = true;
  }
  return stale_cache_;
}

std::string Server::BuildStatusJson() {
  using nlohmann::json;
  json doc;
  doc["schema_version"] = 1;
  doc["broker"] = {
      {"pid", ::getpid()},
      {"uid", ::getuid()},
      {"uptime_s", std::chrono::duration<double>(Clock::now() - started_).count()},
      {"socket", Clean(options_.socket_path)},
      {"version", kBrokerVersion},
      {"protocol_version", ipc::kProtocolVersion},
      {"connections", sessions_.size()},
      {"max_connections", max_connections_},
      {"remembered_names", last_generation_.size()},
      {"ended_names", ended_names_.size()},
  };
  json groups = json::array();
  json problems = json::array();
  std::set<std::string> ours;
  for (const auto& [name, gp] : groups_) {
    const Group& g = *gp;
    const ipc::SegmentHeader* h = g.seg->header();
    ours.insert(g.seg->name());
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
    if (state == static_cast<uint32_t>(GroupState::kFailed)) {
      // Written by whoever can write the segment, so checked here again.
      group["failure_reason"] = Clean(ipc::ReadField(h->failure_reason, sizeof(h->failure_reason)));
    }
    json members = json::array();
    std::vector<int> missing, attached;
    for (int r = 0; r < g.world_size; ++r) {
      const auto& m = g.members[static_cast<size_t>(r)];
      const ipc::MemberSlot* slot = g.seg->slot(r);
      bool published = LoadAcquire(&slot->published) != 0;
      if (!m.has_value()) {
        missing.push_back(r);
        continue;
      }
      attached.push_back(r);
      json ops = json::object(), bytes = json::object();
      for (int c = 0; c < ipc::kNumCounters; ++c) {
        ops[ipc::kCounterNames[c]] = __atomic_load_n(&slot->ops[c], __ATOMIC_RELAXED);
        bytes[ipc::kCounterNames[c]] = __atomic_load_n(&slot->bytes[c], __ATOMIC_RELAXED);
      }
      uint64_t progress = __atomic_load_n(&slot->last_progress_unix_ms, __ATOMIC_RELAXED);
      json member = {
          {"rank", r},
          {"pid", m->pid},
          {"alive", m->session != nullptr || g.seg->SlotHeld(r)},
          {"connected", m->session != nullptr},
          {"published", published},
          {"device", Clean(m->device)},
          {"blob_kind",
           !published                                                          ? "none"
           : slot->kind == static_cast<uint32_t>(ipc::BlobKind::kGpuIpcHandle) ? "gpu_ipc_handle"
           : slot->kind == static_cast<uint32_t>(ipc::BlobKind::kHostSegment)  ? "host_segment"
                                                                               : "none"},
          {"ops", ops},
          {"bytes", bytes},
      };
      member["last_progress_s"] = progress == 0 ? json(nullptr) : json(SecondsSince(progress));
      members.push_back(member);
    }
    group["members"] = members;
    group["missing_ranks"] = missing;
    if (state == static_cast<uint32_t>(GroupState::kFailed)) {
      problems.push_back(
          {{"severity", "error"},
           {"group", Clean(g.name)},
           {"message",
            Clean(g.Describe()) + " FAILED: " + group["failure_reason"].get<std::string>()},
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
    groups.push_back(group);
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
