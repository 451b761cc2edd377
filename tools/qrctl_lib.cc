#include "tools/qrctl_lib.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "ipc/broker_client.h"
#include "ipc/gc.h"
#include "ipc/group_client.h"
#include "ipc/names.h"

namespace qr::tools {
namespace {

using nlohmann::json;

std::string Duration(double s) {
  std::ostringstream o;
  if (s < 60) {
    o << std::fixed << std::setprecision(1) << s << "s";
  } else if (s < 3600) {
    o << static_cast<int>(s / 60) << "m" << std::setw(2) << std::setfill('0')
      << static_cast<int>(s) % 60 << "s";
  } else {
    o << static_cast<int>(s / 3600) << "h" << std::setw(2) << std::setfill('0')
      << static_cast<int>(s / 60) % 60 << "m";
  }
  return o.str();
}

std::string Bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream o;
  if (u == 0) {
    o << b << " B";
  } else {
    o << std::fixed << std::setprecision(1) << v << " " << units[u];
  }
  return o.str();
}

std::string Codecs(const json& counters, bool bytes) {
  std::string s;
  for (const char* c : ipc::kCounterNames) {
    uint64_t v = counters.value(c, uint64_t{0});
    if (v == 0) continue;
    s += (s.empty() ? "" : " ") + std::string(c) + "=" + (bytes ? Bytes(v) : std::to_string(v));
  }
  return s.empty() ? "-" : s;
}

StatusOr<json> FetchStatus(const std::string& socket, int timeout_ms) {
  auto text = ipc::QueryStatus(socket, std::chrono::milliseconds(timeout_ms));
  if (!text.ok()) return text.status();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InternalError("the broker sent a status document that is not JSON");
  }
  return doc;
}

json NoBrokerDoc(const std::string& socket, const Status& why) {
  ipc::SweepResult stale = ipc::SweepStale(::getuid(), /*dry_run=*/true);
  json problems = json::array();
  problems.push_back({{"severity", "error"},
                      {"group", nullptr},
                      {"message", why.message()},
                      {"remedy",
                       "start qr-broker (clients start one themselves unless "
                       "QR_BROKER_AUTOSTART=0), or point QR_BROKER_SOCKET / "
                       "--socket at the right socket"}});
  return {{"schema_version", 1},
          {"broker", nullptr},
          {"socket", socket},
          {"groups", json::array()},
          {"stale_objects", stale.removed},
          {"live_segments", stale.live_segments},
          {"problems", problems}};
}

int Status1(const std::string& socket, bool as_json, int timeout_ms, std::ostream& out) {
  auto doc = FetchStatus(socket, timeout_ms);
  if (!doc.ok()) {
    json d = NoBrokerDoc(socket, doc.status());
    if (as_json) {
      out << d.dump(2) << "\n";
    } else {
      out << "no broker: " << doc.status().message() << "\n";
      if (!d["live_segments"].empty()) {
        out << "groups still running without a broker:";
        for (const auto& s : d["live_segments"]) out << " " << s.get<std::string>();
        out << "\n";
      }
      if (!d["stale_objects"].empty()) {
        out << d["stale_objects"].size() << " stale shm objects; run `qrctl gc`\n";
      }
    }
    return kExitNoBroker;
  }
  if (as_json) {
    out << doc->dump(2) << "\n";
  } else {
    out << RenderStatusText(*doc);
  }
  return ExitCodeFor(*doc);
}

}  // namespace

int ExitCodeFor(const json& doc) {
  if (!doc.contains("broker") || doc["broker"].is_null()) return kExitNoBroker;
  return doc.value("problems", json::array()).empty() ? kExitHealthy : kExitDegraded;
}

std::string RenderStatusText(const json& doc) {
  std::ostringstream o;
  const json& b = doc["broker"];
  o << "broker   pid " << b.value("pid", 0) << ", up " << Duration(b.value("uptime_s", 0.0))
    << ", version " << b.value("version", "?") << " (protocol " << b.value("protocol_version", 0)
    << ")\n"
    << "socket   " << b.value("socket", "?") << "\n";
  const json groups = doc.value("groups", json::array());
  if (groups.empty()) o << "groups   none\n";
  for (const json& g : groups) {
    o << "\ngroup " << g.value("name", "?") << "  generation " << g.value("generation", 0)
      << "  world size " << g.value("world_size", 0) << "  " << g.value("state", "?")
      << (g.value("adopted", false) ? " (adopted)" : "") << "  age "
      << Duration(g.value("age_s", 0.0)) << "\n"
      << "  segment " << g.value("segment", "?") << "  buffer "
      << Bytes(g.value("buffer_bytes", uint64_t{0})) << "\n";
    if (g.contains("failure_reason")) {
      o << "  failure: " << g["failure_reason"].get<std::string>() << "\n";
    }
    o << "  " << std::left << std::setw(5) << "rank" << std::setw(9) << "pid" << std::setw(6)
      << "alive" << std::setw(10) << "published" << std::setw(16) << "device" << std::setw(24)
      << "ops" << std::setw(28) << "bytes"
      << "last progress\n";
    for (const json& m : g.value("members", json::array())) {
      const json& lp = m["last_progress_s"];
      o << "  " << std::left << std::setw(5) << m.value("rank", -1) << std::setw(9)
        << m.value("pid", 0) << std::setw(6) << (m.value("alive", false) ? "yes" : "NO")
        << std::setw(10) << (m.value("published", false) ? "yes" : "no") << std::setw(16)
        << m.value("device", "?") << std::setw(24) << Codecs(m["ops"], false) << std::setw(28)
        << Codecs(m["bytes"], true)
        << (lp.is_null() ? "never" : Duration(lp.get<double>()) + " ago") << "\n";
    }
    const json missing = g.value("missing_ranks", json::array());
    if (!missing.empty()) {
      o << "  missing ranks:";
      for (const auto& r : missing) o << " " << r.get<int>();
      o << "\n";
    }
  }
  const json problems = doc.value("problems", json::array());
  if (!problems.empty()) {
    o << "\nproblems\n";
    for (const json& p : problems) {
      o << "  [" << p.value("severity", "?") << "] " << p.value("message", "") << "\n"
        << "    fix: " << p.value("remedy", "") << "\n";
    }
  }
  o << "\nstatus: " << (problems.empty() ? "healthy" : "degraded") << "\n";
  return o.str();
}

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
  for (const auto& name : r.removed)
    out << (dry_run ? "would remove " : "removed ") << name << "\n";
  for (const auto& e : r.errors) err << "qrctl: could not remove " << e << "\n";
  if (!dry_run) {
    bool removed = false;
    Status s = ipc::RemoveStaleSocket(*path, &removed);
    if (!s.ok()) {
      err << "qrctl: " << s.message() << "\n";
      return kExitDegraded;
    }
    if (removed) out << "removed stale socket " << *path << "\n";
  }
  if (r.removed.empty()) out << "nothing to remove\n";
  return r.errors.empty() ? kExitHealthy : kExitDegraded;
}

}  // namespace qr::tools
