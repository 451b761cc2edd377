// The qr-broker daemon's logic: group formation over a Unix socket and POSIX
// shared memory (DESIGN.md "The control path (broker)").
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
#ifndef QR_IPC_BROKER_SERVER_H_
#define QR_IPC_BROKER_SERVER_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "asio.hpp"
#include "common/status.h"
#include "common/unique_fd.h"
#include "common/version.h"
#include "ipc/wire.h"

namespace qr::broker {

inline constexpr const char* kBrokerVersion = kVersion;

struct ServerOptions {
  std::string socket_path;  // resolved already (ipc::ResolveSocketPath)
  // How often adopted groups and join deadlines are checked.
  std::chrono::milliseconds tick{100};
};

class Session;
struct Group;

class Server {
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

  // For the session objects.
  void OnMessage(const std::shared_ptr<Session>& s, ipc::Message m);
  void OnDisconnect(const std::shared_ptr<Session>& s);

 private:
  Server(asio::io_context& io, ServerOptions options);
  Status Listen();
  void Adopt();
  void Accept();
  void Tick();
  void HandleJoin(const std::shared_ptr<Session>& s, const ipc::JoinRequest& req);
  void HandlePublished(const std::shared_ptr<Session>& s);
  void HandleLeave(const std::shared_ptr<Session>& s);
  void HandleAbort(const std::shared_ptr<Session>& s, const ipc::AbortRequest& req);
  void Refuse(const std::shared_ptr<Session>& s, const Status& status);
  void Fail(Group& g, const std::string& reason, uint32_t abort_code);
  void Release(Group& g, int rank);
  void MaybeDestroy(const std::string& name);
  std::string StatusJson() const;

  asio::io_context& io_;
  ServerOptions options_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer timer_;
  asio::steady_timer timer_accept_;  // retries accept after an error
  UniqueFd lock_fd_;
  bool stopped_ = false;
  bool listening_ = false;  // we hold the lock and bound the socket
  std::chrono::steady_clock::time_point started_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  std::map<std::string, uint64_t> last_generation_;
  std::map<Session*, std::shared_ptr<Session>> sessions_;
};

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_SERVER_H_
