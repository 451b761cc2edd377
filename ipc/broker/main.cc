// qr-broker: the quickreduce group-formation daemon. See server.h.
//
//   qr-broker [--socket PATH] [--max-connections N] [--max-connections-per-uid N]
//             [--request-timeout-ms MS] [--remembered-names N] [--max-log-bytes N]
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
  qr::broker::ServerOptions options;
  int request_timeout_ms = static_cast<int>(options.request_timeout.count());
  app.add_option("--max-connections", options.max_connections,
                 "connections open at once (lowered to fit the descriptor limit)")
      ->check(CLI::Range(8, 1 << 20));
  app.add_option("--max-connections-per-uid", options.max_connections_per_uid,
                 "connections of one uid at once (other uids get at most 4)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--request-timeout-ms", request_timeout_ms,
                 "drop a connection that holds no rank (or half a frame) after this long "
                 "without a complete request")
      ->check(CLI::Range(10, 3600 * 1000));
  app.add_option("--remembered-names", options.remembered_names,
                 "group names whose last generation is kept after their group ended")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  app.add_option("--max-log-bytes", options.max_log_bytes,
                 "rotate stderr, when it is a file, to <file>.1 beyond this size")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 40));
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
  options.socket_path = *path;
  options.request_timeout = std::chrono::milliseconds(request_timeout_ms);
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
