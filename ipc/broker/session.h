// Session: the broker's transport for one client connection. It reads framed
// requests (ipc/wire.h) and hands each to its owner, queues replies with a
// bound, and closes gracefully. Single-threaded: everything runs on the
// io_context's thread.
//
// Limits (docs/broker.md "Reliability"): requests are small
// (ipc::kMaxRequestFrameBytes); at most kRequestsPerTurn requests are handled
// before other connections get their turn; the connection is not read while
// kPauseReadingBytes of its replies are unread, and is dropped when more than
// kMaxQueuedBytes are. An exception that escapes a handler ends this
// connection only.
#ifndef QR_IPC_BROKER_SESSION_H_
#define QR_IPC_BROKER_SESSION_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "asio.hpp"
#include "common/status.h"
#include "ipc/broker/registry.h"
#include "ipc/wire.h"

namespace qr::broker {

using Socket = asio::local::stream_protocol::socket;

class Session;

// What a session tells the server that owns it.
class SessionOwner {
 public:
  // A complete request arrived.
  virtual void OnRequest(const std::shared_ptr<Session>& s, ipc::Message m) = 0;
  // The connection is closed; called once, after which the session only
  // waits for its last handlers to drop their references.
  virtual void OnClosed(const std::shared_ptr<Session>& s) = 0;
  // False when a warning about a single connection should be dropped.
  virtual bool WarnBudget() = 0;

 protected:
  virtual ~SessionOwner() = default;
};

// One client connection. Owned by its SessionOwner until it is finished. Its
// Client fields (pid, group, rank) are the registry's view of it.
class Session : public Client, public std::enable_shared_from_this<Session> {
 public:
  Session(SessionOwner* owner, Socket socket, asio::io_context& io)
      : owner_(owner), socket_(std::move(socket)), linger_(io) {}

  void Start() { Read(); }

  // Queues a reply. A reply that cannot be encoded becomes an error reply
  // and ends the connection; one that overflows kMaxQueuedBytes drops it.
  void Send(const ipc::Message& m) override;
  // Sends what is queued, then half-closes and drops what the peer still
  // sends until it closes (so the peer reads our last frame instead of a
  // reset), for at most kCloseLinger.
  void CloseAfterWrites() override;
  // Closes now and tells the owner. Idempotent.
  void Finish();
  // Ends the connection now, with one non-blocking try to tell the peer why.
  void SayAndFinish(const Status& why);

  Socket& socket() { return socket_; }
  bool finished() const { return finished_; }
  bool closing() const { return closing_; }
  // Whether this connection owes us the rest of a request, and since when it
  // has completed none.
  bool partial_frame() const { return !in_.empty(); }
  std::chrono::steady_clock::time_point last_request() const { return last_request_; }

  uint32_t uid = 0;

 private:
  void Read();
  void OnRead(const std::error_code& ec, size_t n);
  void Process();
  void DrainOrRead();
  void Yield();
  void Write();
  void OnWrite(const std::error_code& ec);
  void HalfClose();

  SessionOwner* owner_;
  Socket socket_;
  asio::steady_timer linger_;
  // Requests are small (kMaxRequestFrameBytes): an idle connection costs
  // little more than this buffer.
  std::array<uint8_t, 1024> buf_{};
  std::vector<uint8_t> in_;
  std::deque<std::vector<uint8_t>> out_;
  size_t queued_bytes_ = 0;
  std::chrono::steady_clock::time_point last_request_ = std::chrono::steady_clock::now();
  bool reading_ = false;
  bool processing_ = false;
  bool resume_after_write_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool finished_ = false;
};

// Sends one small frame without waiting (MSG_DONTWAIT): to a new socket, or
// one whose queue is empty, it goes out whole or not at all. For telling a
// peer why it is being dropped.
void SendNowOrNever(int fd, const Status& why);

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_SESSION_H_
