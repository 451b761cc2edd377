#include "ipc/broker_client.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/env_vars.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/syscall.h"
#include "ipc/broker_binary.h"
#include "ipc/names.h"

namespace qr::ipc {
namespace {

int MsUntil(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  if (left < 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, INT_MAX));
}

}  // namespace

StatusOr<std::unique_ptr<BrokerConnection>> BrokerConnection::Connect(
    const std::string& socket_path) {
  return Dial(socket_path, nullptr);
}

StatusOr<std::unique_ptr<BrokerConnection>> BrokerConnection::Dial(const std::string& socket_path,
                                                                   bool* nobody_listens) {
  if (nobody_listens != nullptr) *nobody_listens = false;
  if (socket_path.size() > kMaxSocketPathBytes) {
    return InvalidArgumentError("socket path too long: " + socket_path);
  }
  QR_ASSIGN_OR_RETURN(
      int raw, SysCall("socket", [] { return ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); }));
  UniqueFd fd(raw);
  QR_RETURN_IF_ERROR(CheckRuntimeDirectory(socket_path, /*create=*/false));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  int rc = RetryOnEintr(
      [&] { return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)); });
  if (rc != 0) {
    int err = errno;
    if (nobody_listens != nullptr) *nobody_listens = err == ENOENT || err == ECONNREFUSED;
    return UnavailableError("no broker at " + socket_path + ": " + std::strerror(err));
  }
  // Whoever answers must be us: a broker of another uid could hand out its
  // own segment, read our slot (a GPU IPC handle) and feed us its buffers.
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoToStatus(errno, "SO_PEERCRED of " + socket_path);
  }
  if (cred.uid != ::geteuid()) {
    return UnavailableError("refusing the broker at " + socket_path + ": it runs as uid " +
                            std::to_string(cred.uid) + " (pid " + std::to_string(cred.pid) +
                            "), not as us (uid " + std::to_string(::geteuid()) +
                            "); set XDG_RUNTIME_DIR or QR_BROKER_SOCKET to a path of your own");
  }
  return std::unique_ptr<BrokerConnection>(new BrokerConnection(std::move(fd)));
}

StatusOr<std::unique_ptr<BrokerConnection>> BrokerConnection::ConnectOrStart(
    const std::string& socket_path, bool autostart, Deadline deadline) {
  bool nobody_listens = false;
  auto conn = Dial(socket_path, &nobody_listens);
  // Only an empty socket path is ours to fill: a refused directory or a
  // broker of another uid is reported, not raced.
  if (conn.ok() || !autostart || !nobody_listens) return conn;
  Log().info("no broker at {}; starting one", socket_path);
  QR_RETURN_IF_ERROR(StartBroker(socket_path));
  auto pause = std::chrono::milliseconds(5);
  while (true) {
    std::this_thread::sleep_for(pause);
    conn = Dial(socket_path, &nobody_listens);
    if (conn.ok() || !nobody_listens) return conn;
    if (std::chrono::steady_clock::now() >= deadline) {
      return UnavailableError("started a broker but none answered at " + socket_path +
                              " in time (see " + socket_path + ".log): " + conn.status().message());
    }
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

Status StartBroker(const std::string& socket_path) {
  constexpr char kHint[] = " (set QR_BROKER_BIN, or QR_BROKER_AUTOSTART=0 and start one)";
  StatusOr<std::string> found =
      FindBrokerBinary(BrokerSearchFromEnvironment(kEnvBrokerBin.String()));
  if (!found.ok())
    return UnavailableError("cannot start a broker: " + found.status().message() + kHint);
  const std::string& bin = *found;
  std::string log = socket_path + ".log";
  // Everything exec needs is prepared before fork: the child may only make
  // async-signal-safe calls.
  std::vector<std::string> args = {bin, "--socket", socket_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The broker creates the socket's directory; the log lives beside the socket.
  QR_RETURN_IF_ERROR(CheckRuntimeDirectory(socket_path, /*create=*/true));

  int pipefd[2];
  QR_SYS_RETURN_IF_ERROR(::pipe2(pipefd, O_CLOEXEC));
  UniqueFd rd(pipefd[0]), wr(pipefd[1]);
  pid_t child = ::fork();
  if (child < 0) return ErrnoToStatus(errno, "fork");
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) ::_exit(grandchild < 0 ? 1 : 0);
    int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    // The daemon outlives the caller: it must not keep the caller's
    // descriptors (pipes a parent waits on for EOF, sockets, files) open.
    // Close-on-exec rather than closed, so `wr` can still report a failed exec.
    if (::close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 65536; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    ::execvp(argv[0], argv.data());
    int err = errno;
    ssize_t ignored = ::write(wr.get(), &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }
  wr.reset();
  int status = 0;
  RetryOnEintr([&] { return ::waitpid(child, &status, 0); });
  int err = 0;
  ssize_t n = RetryOnEintr([&] { return ::read(rd.get(), &err, sizeof(err)); });
  if (n == static_cast<ssize_t>(sizeof(err))) {
    return UnavailableError("cannot start broker " + bin + ": " + std::strerror(err) + kHint);
  }
  return OkStatus();
}

Status BrokerConnection::Send(const Message& m) {
  QR_ASSIGN_OR_RETURN(std::vector<uint8_t> frame, EncodeFrame(m));
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = RetryOnEintr(
        [&] { return ::send(fd_.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL); });
    if (n < 0) {
      return UnavailableError(std::string("broker connection lost: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  return OkStatus();
}

Status BrokerConnection::Fill(int timeout_ms) {
  if (eof_) return UnavailableError("the broker closed the connection");
  pollfd p{fd_.get(), POLLIN, 0};
  int rc = RetryOnEintr([&] { return ::poll(&p, 1, timeout_ms); });
  if (rc < 0) return ErrnoToStatus(errno, "poll");
  if (rc == 0) return OkStatus();
  uint8_t buf[16384];
  ssize_t n = RetryOnEintr([&] { return ::recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT); });
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return OkStatus();
    eof_ = true;
    return UnavailableError(std::string("broker connection lost: ") + std::strerror(errno));
  }
  if (n == 0) {
    eof_ = true;
    return UnavailableError("the broker closed the connection");
  }
  in_.insert(in_.end(), buf, buf + n);
  return OkStatus();
}

StatusOr<std::optional<Message>> BrokerConnection::TakeFrame() {
  if (in_.empty()) return std::optional<Message>();
  size_t consumed = 0;
  QR_ASSIGN_OR_RETURN(std::optional<Message> m, TryDecodeFrame(in_.data(), in_.size(), &consumed));
  if (m.has_value()) in_.erase(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(consumed));
  return m;
}

StatusOr<Message> BrokerConnection::Receive(Deadline deadline) {
  while (true) {
    QR_ASSIGN_OR_RETURN(std::optional<Message> m, TakeFrame());
    if (m.has_value()) return std::move(*m);
    int wait = MsUntil(deadline);
    if (wait == 0 && std::chrono::steady_clock::now() >= deadline) {
      return TimeoutError("no answer from the broker in time");
    }
    QR_RETURN_IF_ERROR(Fill(wait));
  }
}

StatusOr<std::optional<Message>> BrokerConnection::Poll() {
  QR_ASSIGN_OR_RETURN(std::optional<Message> m, TakeFrame());
  if (m.has_value()) return m;
  QR_RETURN_IF_ERROR(Fill(0));
  return TakeFrame();
}

StatusOr<std::string> QueryStatus(const std::string& socket_path,
                                  std::chrono::milliseconds timeout) {
  QR_ASSIGN_OR_RETURN(auto conn, BrokerConnection::Connect(socket_path));
  QR_RETURN_IF_ERROR(conn->Send(StatusRequest{}));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  constexpr size_t kMaxDocumentBytes = 64 << 20;
  std::string doc;
  while (true) {
    QR_ASSIGN_OR_RETURN(Message reply, conn->Receive(deadline));
    if (auto* s = std::get_if<StatusReply>(&reply)) {
      doc += s->json;
      if (doc.size() > kMaxDocumentBytes) return InternalError("status document too large");
      if (!s->more) return doc;
      continue;
    }
    if (auto* e = std::get_if<ErrorReply>(&reply)) {
      return StatusOf(*e);
    }
    return InternalError(std::string("unexpected ") +
                         MessageTypeName(static_cast<uint16_t>(TypeOf(reply))) +
                         " in answer to STATUS");
  }
}

}  // namespace qr::ipc
