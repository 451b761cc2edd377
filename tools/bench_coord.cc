#include "tools/bench_coord.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "common/status_macros.h"
#include "common/syscall.h"

namespace qr::bench {
namespace {

StatusOr<sockaddr_un> Address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(a.sun_path)) {
    return InvalidArgumentError(
        fmt::format("coordinator socket path '{}' is empty or too long", path));
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Writes all of `text` (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
Status SendAll(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = RetryOnEintr(
        [&] { return ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL); });
    if (n < 0) return UnavailableError(fmt::format("coordinator: send: {}", std::strerror(errno)));
    off += static_cast<size_t>(n);
  }
  return OkStatus();
}

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

Status CheckCoordPayload(const std::string& payload) {
  if (payload.find('\n') != std::string::npos ||
      payload.find(kCoordSeparator) != std::string::npos) {
    return InvalidArgumentError("coordinator payload holds a newline or the separator");
  }
  return OkStatus();
}

std::string HexEncode(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

StatusOr<std::string> HexDecode(const std::string& hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return InvalidArgumentError("odd-length hex string");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgumentError("not a lower-case hex string");
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

StatusOr<CoordServer> CoordServer::Listen(const std::string& path, int world_size) {
  QR_ASSIGN_OR_RETURN(sockaddr_un a, Address(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return InternalError(fmt::format("coordinator: socket: {}", std::strerror(errno)));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd.get(), world_size) != 0) {
    return InternalError(
        fmt::format("coordinator: bind/listen {}: {}", path, std::strerror(errno)));
  }
  return CoordServer(std::move(fd), world_size);
}

Status CoordServer::Accept() {
  UniqueFd c(
      RetryOnEintr([&] { return ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC); }));
  if (!c) return InternalError(fmt::format("coordinator: accept: {}", std::strerror(errno)));
  // After an abort a rank that connects late is turned away at once (its
  // first exchange fails) instead of waiting on a run that is over.
  if (aborted()) return OkStatus();
  Peer p;
  p.fd = std::move(c);
  peers_.push_back(std::move(p));
  return OkStatus();
}

Status CoordServer::Read(Peer& p) {
  char buf[4096];
  const ssize_t n = RetryOnEintr([&] { return ::read(p.fd.get(), buf, sizeof(buf)); });
  if (n <= 0) {
    // EOF or a reset: the rank is gone. Lines it sent before still count.
    p.closed = true;
    p.fd.reset();
    return OkStatus();
  }
  p.in.append(buf, static_cast<size_t>(n));
  for (size_t nl; (nl = p.in.find('\n')) != std::string::npos;) {
    std::string line = p.in.substr(0, nl);
    p.in.erase(0, nl + 1);
    if (p.rank < 0) {
      // The hello line: "R<rank>".
      int r = -1;
      if (line.size() >= 2 && line[0] == 'R') r = std::atoi(line.c_str() + 1);
      for (const Peer& q : peers_) {
        if (&q != &p && q.rank == r) r = -1;  // a rank twice
      }
      if (r < 0 || r >= ws_) {
        Abort(fmt::format("a worker said '{}' instead of its rank", line));
        return OkStatus();
      }
      p.rank = r;
      continue;
    }
    p.lines.push_back(std::move(line));
  }
  return OkStatus();
}

void CoordServer::Answer() {
  while (!aborted()) {
    std::vector<Peer*> by_rank(ws_, nullptr);
    for (Peer& p : peers_) {
      if (p.rank >= 0) by_rank[p.rank] = &p;
    }
    bool complete = true;
    for (Peer* p : by_rank) complete = complete && p != nullptr && !p->lines.empty();
    if (!complete) {
      // A rank that left can never complete a round another rank opened.
      for (Peer* p : by_rank) {
        if (p == nullptr || !p->closed || !p->lines.empty()) continue;
        for (Peer* w : by_rank) {
          if (w != nullptr && !w->lines.empty()) {
            Abort(fmt::format("rank {} left while rank {} waited", p->rank, w->rank));
            return;
          }
        }
      }
      return;
    }
    std::string joined;
    for (int r = 0; r < ws_; ++r) {
      if (r > 0) joined += kCoordSeparator;
      joined += by_rank[r]->lines.front();
      by_rank[r]->lines.pop_front();
    }
    joined += '\n';
    ++rounds_;
    for (Peer* p : by_rank) {
      // A rank that closed after sending its line misses the answer; the
      // others go on, and the next round finds it gone.
      if (!p->closed) (void)SendAll(p->fd.get(), joined);
    }
  }
}

Status CoordServer::Poll(int timeout_ms) {
  std::vector<pollfd> fds;
  fds.push_back({listener_.get(), POLLIN, 0});
  std::vector<Peer*> polled;
  for (Peer& p : peers_) {
    if (p.closed) continue;
    fds.push_back({p.fd.get(), POLLIN, 0});
    polled.push_back(&p);
  }
  const int n = RetryOnEintr([&] { return ::poll(fds.data(), fds.size(), timeout_ms); });
  if (n < 0) return InternalError(fmt::format("coordinator: poll: {}", std::strerror(errno)));
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) QR_RETURN_IF_ERROR(Read(*polled[i - 1]));
  }
  // Accept last: peers_ may grow (and move) here.
  if (fds[0].revents & POLLIN) QR_RETURN_IF_ERROR(Accept());
  Answer();
  return OkStatus();
}

void CoordServer::Abort(const std::string& why) {
  if (abort_reason_.empty()) abort_reason_ = why;
  for (Peer& p : peers_) {
    p.fd.reset();
    p.closed = true;
  }
}

bool CoordServer::done() const {
  int closed = 0;
  for (const Peer& p : peers_) {
    if (p.rank >= 0 && p.closed && p.lines.empty()) ++closed;
  }
  return closed == ws_;
}

StatusOr<CoordClient> CoordClient::Connect(const std::string& path, int rank,
                                           std::chrono::milliseconds timeout) {
  QR_ASSIGN_OR_RETURN(sockaddr_un a, Address(path));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return InternalError(fmt::format("coordinator: socket: {}", std::strerror(errno)));
    if (RetryOnEintr(
            [&] { return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)); }) == 0) {
      QR_RETURN_IF_ERROR(SendAll(fd.get(), fmt::format("R{}\n", rank)));
      return CoordClient(std::move(fd), rank);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return UnavailableError(
          fmt::format("coordinator: connecting to {}: {}", path, std::strerror(errno)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

StatusOr<std::vector<std::string>> CoordClient::AllGather(const std::string& payload) {
  QR_RETURN_IF_ERROR(CheckCoordPayload(payload));
  if (!fd_) return UnavailableError("coordinator: connection closed");
  QR_RETURN_IF_ERROR(SendAll(fd_.get(), payload + "\n"));
  while (true) {
    if (const size_t nl = in_.find('\n'); nl != std::string::npos) {
      std::string line = in_.substr(0, nl);
      in_.erase(0, nl + 1);
      return Split(line, kCoordSeparator);
    }
    char buf[4096];
    const ssize_t n = RetryOnEintr([&] { return ::read(fd_.get(), buf, sizeof(buf)); });
    if (n <= 0) {
      fd_.reset();
      return UnavailableError(
          "coordinator: the launcher closed the connection (a rank left or the run was stopped)");
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

Status CoordClient::Barrier() { return AllGather("").status(); }

StatusOr<std::string> CoordClient::Broadcast(const std::string& payload) {
  QR_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(payload));
  return all[0];
}

Status CoordClient::AllOk(const Status& mine) {
  std::string why;
  if (!mine.ok()) {
    why = mine.ToString();
    for (char& c : why) {
      if (c == '\n' || c == kCoordSeparator) c = ' ';
    }
  }
  QR_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(mine.ok() ? "ok" : "E" + why));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != "ok") {
      return InternalError(fmt::format("rank {}: {}", r, all[r].empty() ? "" : all[r].substr(1)));
    }
  }
  return OkStatus();
}

}  // namespace qr::bench
