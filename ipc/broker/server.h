// The qr-broker daemon: listens on a Unix socket, admits connections, runs
// the tick, stops on signals (DESIGN.md "The control path (broker)"). The
// parts: session.h (one connection's transport), registry.h (groups, their
// state machine, adoption), status_doc.h (what qrctl reads).
//
//   asio::io_context io;
//   QR_ASSIGN_OR_RETURN(auto server, Server::Start(io, {socket_path}));
//   server->StopOnSignals();   // SIGTERM / SIGINT
//   io.run();                  // returns after Stop()
//
// Start takes an exclusive flock on `<socket>.lock` (kAlreadyExists when
// another broker holds it: with many racing starters exactly one wins),
// removes stale shm objects whose owners are dead, adopts live groups left by
// an earlier broker (watching their members by their slot locks), and listens
// on the socket (directory 0700 when it creates it, socket 0600). Peers of
// another uid are refused (SO_PEERCRED). Single-threaded: everything runs on
// the io_context's thread.
//
// Limits (DESIGN.md, docs/broker.md "Reliability"): connections are capped in
// total and per uid (other uids, which are only told no, get a few); a
// connection that holds no rank must complete each request within
// request_timeout; requests are small (ipc::kMaxRequestFrameBytes); each
// connection gets a bounded number of requests per turn and is not read while
// kPauseReadingBytes of its replies are unread; the status document and the
// /dev/shm scan behind it are cached briefly. The broker watches its socket:
// when the path no longer leads to the socket it bound (the directory was
// removed, another broker took it over), it stops, leaving the path alone.
#ifndef QR_IPC_BROKER_SERVER_H_
#define QR_IPC_BROKER_SERVER_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "asio.hpp"
#include "common/status.h"
#include "common/unique_fd.h"
#include "common/version.h"
#include "ipc/broker/registry.h"
#include "ipc/broker/session.h"
#include "ipc/broker/status_doc.h"
#include "ipc/wire.h"

namespace qr::broker {

inline constexpr const char* kBrokerVersion = kVersion;

struct ServerOptions {
  std::string socket_path;  // resolved already (ipc::ResolveSocketPath)
  // How often adopted groups, join deadlines, idle connections and the socket
  // are checked.
  std::chrono::milliseconds tick{100};
  // Connections open at once; lowered to fit the descriptor limit.
  int max_connections = 4096;
  // Connections of one uid at once (ours); another uid gets at most
  // kMaxForeignConnections.
  int max_connections_per_uid = 4096;
  // A connection that holds no rank, or holds half a frame, is dropped when
  // it has not completed a request for this long.
  std::chrono::milliseconds request_timeout{5000};
  // Group names whose last generation is remembered after their group ended
  // (so a re-formed group gets a new generation); the oldest are forgotten.
  size_t remembered_names = 4096;
  // When stderr is a regular file (the autostart log), it is rotated to
  // `<file>.1` once it exceeds this many bytes.
  uint64_t max_log_bytes = 8 << 20;
};

inline constexpr int kMaxForeignConnections = 4;

class Server final : private SessionOwner {
 public:
  // Errors: kAlreadyExists (another broker holds the lock), kUnavailable /
  // kInternal (cannot create the directory, bind or listen).
  [[nodiscard]] static StatusOr<std::unique_ptr<Server>> Start(asio::io_context& io,
                                                               ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops on SIGTERM or SIGINT.
  void StopOnSignals();
  // Closes the listener and every connection and removes the socket. Groups
  // are left running (members keep their mappings and abort word); a later
  // broker adopts them. Idempotent.
  void Stop();

 private:
  Server(asio::io_context& io, ServerOptions options);
  Status Listen();
  void LimitConnections();
  void Accept();
  void Tick();
  bool StillOurSocket() const;
  void CheckIdleSessions(std::chrono::steady_clock::time_point now);
  void DropIdleForLimit(uint32_t uid, bool total_full, int limit);
  bool AdmitConnection(Socket& socket, uint32_t uid, int32_t pid);
  void CountClosed(uint32_t uid);

  // SessionOwner
  void OnRequest(const std::shared_ptr<Session>& s, ipc::Message m) override;
  void OnClosed(const std::shared_ptr<Session>& s) override;
  bool WarnBudget() override;

  asio::io_context& io_;
  ServerOptions options_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer timer_;
  asio::steady_timer timer_accept_;  // retries accept after an error
  UniqueFd lock_fd_;
  bool stopped_ = false;
  bool listening_ = false;  // we hold the lock and bound the socket
  dev_t socket_dev_ = 0;    // the socket we bound, to tell it from a successor's
  ino_t socket_ino_ = 0;
  std::chrono::steady_clock::time_point started_;
  Registry registry_;
  StatusDocument status_;
  std::map<Session*, std::shared_ptr<Session>> sessions_;
  std::map<uint32_t, int> connections_per_uid_;
  int max_connections_ = 0;
  // Warnings about single connections, at most a few per second.
  std::chrono::steady_clock::time_point warn_window_{};
  int warnings_in_window_ = 0;
  int warnings_suppressed_ = 0;
};

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_SERVER_H_
