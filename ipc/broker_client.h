// BrokerConnection: a blocking client connection to qr-broker, used by
// GroupMembership and qrctl.
//
//   QR_ASSIGN_OR_RETURN(auto conn, BrokerConnection::Connect(path));
//   QR_RETURN_IF_ERROR(conn->Send(StatusRequest{}));
//   QR_ASSIGN_OR_RETURN(Message reply, conn->Receive(deadline));
//
// Autostart: ConnectOrStart starts `qr-broker --socket <path>` as a detached
// daemon when nothing answers, then retries. Brokers serialise on an
// exclusive flock of `<socket>.lock`, so when many clients race only one
// broker keeps running; the others exit at once.
#ifndef QR_IPC_BROKER_CLIENT_H_
#define QR_IPC_BROKER_CLIENT_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "ipc/wire.h"

namespace qr::ipc {

using Deadline = std::chrono::steady_clock::time_point;

// Move-only by pointer; thread-compatible.
class BrokerConnection {
 public:
  // One connection attempt. kUnavailable if no broker listens (the message
  // says why: missing socket, refused, permission denied), if the default
  // socket directory is not ours (ipc/names.h CheckRuntimeDirectory), or if
  // the process that answers runs as another uid (SO_PEERCRED): a client
  // never talks to a broker it cannot trust.
  [[nodiscard]] static StatusOr<std::unique_ptr<BrokerConnection>> Connect(
      const std::string& socket_path);
  // Connect; if nothing answers and `autostart`, start a broker (once) and
  // retry until `deadline`. kUnavailable if none answers in time or the
  // broker binary cannot be run.
  [[nodiscard]] static StatusOr<std::unique_ptr<BrokerConnection>> ConnectOrStart(
      const std::string& socket_path, bool autostart, Deadline deadline);

  // Sends one frame. kUnavailable if the broker has gone.
  [[nodiscard]] Status Send(const Message& m);
  // Waits for one message until `deadline`: kTimeout when it passes,
  // kUnavailable on EOF, kInvalidArgument/kUnsupported for a bad frame.
  [[nodiscard]] StatusOr<Message> Receive(Deadline deadline);
  // Never blocks: a message if one is complete, nullopt if none.
  [[nodiscard]] StatusOr<std::optional<Message>> Poll();
  int fd() const { return fd_.get(); }

 private:
  explicit BrokerConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  // Connect; *nobody_listens (if not null) says whether the failure was an
  // absent or dead socket (the one case autostart fixes).
  static StatusOr<std::unique_ptr<BrokerConnection>> Dial(const std::string& socket_path,
                                                          bool* nobody_listens);
  // Reads what is available (waiting up to timeout_ms; 0 = no wait).
  Status Fill(int timeout_ms);
  StatusOr<std::optional<Message>> TakeFrame();

  UniqueFd fd_;
  std::vector<uint8_t> in_;
  bool eof_ = false;
};

// Starts a detached broker for socket_path: the binary ipc/broker_binary.h
// finds ($QR_BROKER_BIN, else beside this executable, in its Bazel runfiles,
// else on $PATH). Its output goes to `<socket>.log`. kUnavailable if there is
// none or it cannot be executed.
[[nodiscard]] Status StartBroker(const std::string& socket_path);

// One STATUS round trip; the broker's JSON document.
[[nodiscard]] StatusOr<std::string> QueryStatus(const std::string& socket_path,
                                                std::chrono::milliseconds timeout);

}  // namespace qr::ipc

#endif  // QR_IPC_BROKER_CLIENT_H_
