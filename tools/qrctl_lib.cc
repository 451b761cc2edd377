#include "tools/qrctl_lib.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/utf8.h"
#include "ipc/broker_client.h"
#include "ipc/gc.h"
#include "ipc/names.h"
#include "tools/qrctl_render.h"

namespace qr::tools {
namespace {

using nlohmann::json;

StatusOr<json> FetchStatus(const std::string& socket, int timeout_ms) {
  auto text = ipc::QueryStatus(socket, std::chrono::milliseconds(timeout_ms));
  if (!text.ok()) return text.status();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InternalError("the broker sent a status document that is not JSON");
  }
  return doc;
}

std::vector<std::string> Sanitized(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) out.push_back(SanitizeUtf8(n));
  return out;
}

json NoBrokerDoc(const std::string& socket, const Status& why) {
  ipc::SweepResult stale = ipc::SweepStale(::getuid(), /*dry_run=*/true);
  json problems = json::array();
  problems.push_back({{"severity", "error"},
                      {"group", nullptr},
                      {"message", SanitizeUtf8(why.message())},
                      {"remedy",
                       "start qr-broker (clients start one themselves unless "
                       "QR_BROKER_AUTOSTART=0), or point QR_BROKER_SOCKET / "
                       "--socket at the right socket"}});
  return {{"schema_version", 1},
          {"broker", nullptr},
          {"socket", SanitizeUtf8(socket)},
          {"groups", json::array()},
          {"stale_objects", Sanitized(stale.removed)},
          {"live_segments", Sanitized(stale.live_segments)},
          {"problems", problems}};
}

int Status1(const std::string& socket, bool as_json, int timeout_ms, std::ostream& out) {
  auto doc = FetchStatus(socket, timeout_ms);
  if (!doc.ok()) {
    json d = NoBrokerDoc(socket, doc.status());
    if (as_json) {
      out << DumpStatus(d, 2) << "\n";
    } else {
      out << "no broker: " << EscapeForTerminal(doc.status().message()) << "\n";
      if (!d["live_segments"].empty()) {
        out << "groups still running without a broker:";
        for (const auto& s : d["live_segments"])
          out << " " << EscapeForTerminal(s.get<std::string>());
        out << "\n";
      }
      if (!d["stale_objects"].empty()) {
        out << d["stale_objects"].size() << " stale shm objects; run `qrctl gc`\n";
      }
    }
    return kExitNoBroker;
  }
  if (as_json) {
    out << DumpStatus(*doc, 2) << "\n";
  } else {
    out << RenderStatusText(*doc);
  }
  return ExitCodeFor(*doc);
}

}  // namespace

int RunQrctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"qrctl: status and cleanup for quickreduce groups"};
  app.require_subcommand(1);
  std::string socket;
  app.add_option("--socket", socket, "broker socket (default: $QR_BROKER_SOCKET or the default)");
  int timeout_ms = 3000;
  app.add_option("--timeout-ms", timeout_ms, "how long to wait for the broker")
      ->check(CLI::Range(1, 600000));

  CLI::App* status = app.add_subcommand("status", "show the broker, groups and problems");
  bool as_json = false, watch = false;
  double interval = 1.0;
  int count = 0;
  status->add_flag("--json", as_json, "print the JSON document (docs/qrctl.md)");
  status->add_flag("--watch", watch, "repeat until interrupted");
  status->add_option("--interval", interval, "seconds between --watch updates")
      ->check(CLI::Range(0.05, 3600.0));
  status->add_option("--count", count, "stop --watch after this many updates (0: never)")
      ->check(CLI::NonNegativeNumber);

  CLI::App* gc = app.add_subcommand("gc", "remove shm objects and sockets of dead owners");
  bool dry_run = false;
  gc->add_flag("--dry-run", dry_run, "only list what would be removed");
  int64_t gc_uid = ::getuid();
  gc->add_option("--uid", gc_uid, "whose objects to sweep (default: yours; others need root)")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967294}));

  try {
    app.parse(argc, const_cast<char**>(argv));
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : kExitDegraded;
  }
  auto path = ipc::ResolveSocketPath(socket);
  if (!path.ok()) {
    err << "qrctl: " << path.status().message() << "\n";
    return kExitNoBroker;
  }

  if (*status) {
    int code = 0;
    for (int i = 0; !watch || count == 0 || i < count; ++i) {
      if (watch && !as_json && ::isatty(STDOUT_FILENO) && &out == &std::cout) {
        out << "\033[H\033[2J";
      }
      code = Status1(*path, as_json, timeout_ms, out);
      out.flush();
      if (!watch) break;
      if (count == 0 || i + 1 < count) {
        std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      }
    }
    return code;
  }

  // gc
  ipc::SweepResult r = ipc::SweepStale(static_cast<uint32_t>(gc_uid), dry_run);
  for (const auto& name : r.removed) {
    out << (dry_run ? "would remove " : "removed ") << EscapeForTerminal(name) << "\n";
  }
  for (const auto& u : r.unknown) {
    out << "kept " << EscapeForTerminal(u)
        << ": another quickreduce version made it; its own qrctl can remove it\n";
  }
  for (const auto& f : r.foreign) {
    out << "ignored " << EscapeForTerminal(f) << ": owned by another user\n";
  }
  for (const auto& e : r.errors) err << "qrctl: " << EscapeForTerminal(e) << "\n";
  if (!dry_run) {
    bool removed = false;
    Status s = ipc::RemoveStaleSocket(*path, &removed);
    if (!s.ok()) {
      err << "qrctl: " << EscapeForTerminal(s.message()) << "\n";
      return kExitDegraded;
    }
    if (removed) out << "removed stale socket " << *path << "\n";
  }
  if (r.removed.empty()) out << "nothing to remove\n";
  return r.errors.empty() ? kExitHealthy : kExitDegraded;
}

}  // namespace qr::tools
