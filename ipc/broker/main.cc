// qr-broker: the quickreduce group-formation daemon. See server.h.
//
//   qr-broker [--socket PATH]
// Exit codes: 0 after SIGTERM/SIGINT, 1 on a start-up error, 3 when another
// broker already serves the socket (the loser of an autostart race).
#include <signal.h>

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "asio.hpp"
#include "common/logging.h"
#include "ipc/broker/server.h"
#include "ipc/names.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  CLI::App app{"quickreduce broker: forms groups over a Unix socket and POSIX shared memory"};
  std::string socket;
  app.add_option(
      "--socket", socket,
      "socket path (default: $QR_BROKER_SOCKET, else "
      "$XDG_RUNTIME_DIR/quickreduce/broker.sock, else /tmp/quickreduce-<uid>/broker.sock)");
  app.set_version_flag("--version", std::string(qr::broker::kBrokerVersion));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  qr::Status log = qr::InitLogging("qr-broker", "info");
  if (!log.ok()) std::fprintf(stderr, "%s\n", log.ToString().c_str());
  ::signal(SIGPIPE, SIG_IGN);

  auto path = qr::ipc::ResolveSocketPath(socket);
  if (!path.ok()) {
    spdlog::error("{}", path.status().ToString());
    return 1;
  }
  asio::io_context io;
  qr::broker::ServerOptions options;
  options.socket_path = *path;
  auto server = qr::broker::Server::Start(io, options);
  if (!server.ok()) {
    if (server.status().code() == qr::StatusCode::kAlreadyExists) {
      spdlog::info("{}", server.status().message());
      return 3;
    }
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  (*server)->StopOnSignals();
  io.run();
  spdlog::info("stopped");
  return 0;
}
