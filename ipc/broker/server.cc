#include "ipc/broker/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/status_macros.h"
#include "common/syscall.h"
#include "common/utf8.h"
#include "ipc/broker/log_file.h"
#include "ipc/gc.h"
#include "ipc/names.h"
#include "spdlog/spdlog.h"

namespace qr::broker {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWarningsPerSecond = 20;
// Descriptors kept free of connections: segments, the lock, the log, accept.
constexpr int kReservedFds = 64;

}  // namespace

Server::Server(asio::io_context& io, ServerOptions options)
    : io_(io),
      options_(std::move(options)),
      acceptor_(io),
      signals_(io),
      timer_(io),
      timer_accept_(io),
      started_(Clock::now()),
      registry_(RegistryOptions{options_.socket_path, options_.remembered_names}) {}

Server::~Server() { Stop(); }

StatusOr<std::unique_ptr<Server>> Server::Start(asio::io_context& io, ServerOptions options) {
  std::unique_ptr<Server> server(new Server(io, std::move(options)));
  QR_RETURN_IF_ERROR(server->Listen());
  server->Accept();
  server->Tick();
  return server;
}

// Connections must run out before descriptors do, or accept fails and nobody
// gets an answer.
void Server::LimitConnections() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    max_connections_ = options_.max_connections;
    return;
  }
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
}

Status Server::Listen() {
  const std::string& path = options_.socket_path;
  QR_RETURN_IF_ERROR(ipc::CheckRuntimeDirectory(path, /*create=*/true));
  std::string lock_path = ipc::LockPathFor(path);
  QR_ASSIGN_OR_RETURN(int raw, SysCall("open " + lock_path, [&] {
                        return ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                                      0600);
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
  LimitConnections();
  ipc::SweepResult sweep = ipc::SweepStale(::getuid(), /*dry_run=*/false);
  for (const auto& name : sweep.removed) spdlog::info("removed stale shm object {}", name);
  for (const auto& err : sweep.errors) spdlog::warn("could not remove {}", err);
  registry_.Adopt();

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
               kBrokerVersion, ipc::kProtocolVersion, ::getpid(), SanitizeUtf8(path),
               max_connections_);
  return OkStatus();
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
  registry_.Clear();  // unmaps; the segments stay for the members
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

// At a limit, our own uid's new connection takes the place of those that have
// gone longest without a request and hold no rank: idle connections cannot
// lock out a client that is about to join. A sixteenth of the limit goes at
// once, so a flood costs one scan per many accepts.
void Server::DropIdleForLimit(uint32_t uid, bool total_full, int limit) {
  std::vector<std::shared_ptr<Session>> idle;
  for (auto& [ptr, s] : sessions_) {
    if (s->finished() || !s->group.empty() || (!total_full && s->uid != uid)) continue;
    idle.push_back(s);
  }
  size_t n = std::min(idle.size(), static_cast<size_t>(std::max(1, limit / 16)));
  std::nth_element(
      idle.begin(), idle.begin() + static_cast<ptrdiff_t>(n), idle.end(),
      [](const auto& a, const auto& b) { return a->last_request() < b->last_request(); });
  std::string why = "the broker is at its limit of " + std::to_string(limit) +
                    (total_full ? " connections" : " connections per uid") +
                    " and this one had been idle longest";
  if (n > 0 && WarnBudget()) spdlog::warn("dropping {} idle connections: {}", n, why);
  for (size_t i = 0; i < n; ++i) idle[i]->SayAndFinish(UnavailableError(why));
}

bool Server::AdmitConnection(Socket& socket, uint32_t uid, int32_t pid) {
  const bool ours = uid == ::getuid();
  const int per_uid = ours ? options_.max_connections_per_uid
                           : std::min(options_.max_connections_per_uid, kMaxForeignConnections);
  auto count = [&] {
    auto it = connections_per_uid_.find(uid);
    return it == connections_per_uid_.end() ? 0 : it->second;
  };
  const bool total_full = static_cast<int>(sessions_.size()) >= max_connections_;
  if (ours && (total_full || count() >= per_uid)) {
    DropIdleForLimit(uid, total_full, total_full ? max_connections_ : per_uid);
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
  // The socket is new, its send buffer empty: one try to say why.
  SendNowOrNever(socket.native_handle(), UnavailableError(why));
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
    }
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
    SessionOwner* owner = this;
    auto s = std::make_shared<Session>(owner, std::move(socket), io_);
    s->pid = cred.pid;
    s->uid = cred.uid;
    sessions_[s.get()] = s;
    s->Start();
    if (cred.uid != ::getuid()) {
      if (WarnBudget()) {
        spdlog::warn("refused pid {} of uid {}: this broker serves uid {}", cred.pid, cred.uid,
                     ::getuid());
      }
      s->Refuse(UnavailableError("this broker serves uid " + std::to_string(::getuid()) +
                                 " only; uid " + std::to_string(cred.uid) +
                                 " must run its own broker"));
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

void Server::Tick() {
  if (stopped_) return;
  auto now = Clock::now();
  if (!StillOurSocket()) {
    spdlog::warn(
        "{} is no longer the socket this broker bound (its directory was removed, or "
        "another broker serves it now); stopping, groups are left running",
        SanitizeUtf8(options_.socket_path));
    Stop();
    return;
  }
  CheckIdleSessions(now);
  CapLogFile(options_.max_log_bytes);
  registry_.Tick(now);
  timer_.expires_after(options_.tick);
  timer_.async_wait([this](const std::error_code& ec) {
    if (!ec) Tick();
  });
}

void Server::OnRequest(const std::shared_ptr<Session>& s, ipc::Message m) {
  if (stopped_) return;
  if (auto* join = std::get_if<ipc::JoinRequest>(&m)) {
    registry_.Join(s, *join);
  } else if (std::holds_alternative<ipc::PublishedNotice>(m)) {
    registry_.Published(s);
  } else if (std::holds_alternative<ipc::LeaveRequest>(m)) {
    registry_.Leave(s);
  } else if (auto* abort = std::get_if<ipc::AbortRequest>(&m)) {
    registry_.Abort(s, *abort);
  } else if (std::holds_alternative<ipc::StatusRequest>(m)) {
    const BrokerFacts facts{options_.socket_path, started_, sessions_.size(), max_connections_};
    const std::string& json = status_.Get(facts, registry_);
    for (size_t off = 0; off == 0 || off < json.size(); off += ipc::kMaxStatusPieceBytes) {
      ipc::StatusReply piece;
      piece.json = json.substr(off, ipc::kMaxStatusPieceBytes);
      piece.more = off + ipc::kMaxStatusPieceBytes < json.size();
      s->Send(piece);
    }
  } else {
    s->Refuse(InvalidArgumentError(
        std::string(ipc::MessageTypeName(static_cast<uint16_t>(ipc::TypeOf(m)))) +
        " is a broker-to-client message"));
  }
}

void Server::OnClosed(const std::shared_ptr<Session>& s) {
  CountClosed(s->uid);
  sessions_.erase(s.get());
  if (stopped_) return;
  registry_.Disconnected(s);
}

}  // namespace qr::broker
