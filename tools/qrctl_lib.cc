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
#include "ipc/group_client.h"
#include "ipc/names.h"

namespace qr::tools {
namespace {

using nlohmann::json;

// The document comes from another process: any field may be missing or of
// another type, and any string may hold terminal escapes. These never throw
// and print every string escaped (EscapeForTerminal).
std::string Text(const json& obj, const char* key, const char* fallback = "?") {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (it->is_string()) return EscapeForTerminal(it->get_ref<const std::string&>());
  if (it->is_null()) return fallback;
  return EscapeForTerminal(it->dump(-1, ' ', false, json::error_handler_t::replace));
}

template <typename T>
T Num(const json& obj, const char* key, T fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  return it->get<T>();
}

bool Flag(const json& obj, const char* key) {
  if (!obj.is_object()) return false;
  auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

const json& Field(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

const json& List(const json& obj, const char* key) {
  static const json kEmpty = json::array();
  const json& v = Field(obj, key);
  return v.is_array() ? v : kEmpty;
}

// A JSON document as text that is valid UTF-8 whatever its strings hold.
std::string Dump(const json& doc, int indent) {
  return doc.dump(indent, ' ', false, json::error_handler_t::replace);
}

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
    uint64_t v = Num(counters, c, uint64_t{0});
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
      out << Dump(d, 2) << "\n";
    } else {
      out << "no broker: " << EscapeForTerminal(doc.status().message()) << "\n";
      if (!d["live_segments"].empty()) {
        out << "groups still running without a broker:";
        for (const auto& s : d["live_segments"]) out << " " << EscapeForTerminal(s.get<std::string>());
        out << "\n";
      }
      if (!d["stale_objects"].empty()) {
        out << d["stale_objects"].size() << " stale shm objects; run `qrctl gc`\n";
      }
    }
    return kExitNoBroker;
  }
  if (as_json) {
    out << Dump(*doc, 2) << "\n";
  } else {
    out << RenderStatusText(*doc);
  }
  return ExitCodeFor(*doc);
}

}  // namespace

int ExitCodeFor(const json& doc) {
  if (!Field(doc, "broker").is_object()) return kExitNoBroker;
  return List(doc, "problems").empty() ? kExitHealthy : kExitDegraded;
}

std::string RenderStatusText(const json& doc) {
  std::ostringstream o;
  const json& b = Field(doc, "broker");
  o << "broker   pid " << Num(b, "pid", 0) << ", up " << Duration(Num(b, "uptime_s", 0.0))
    << ", version " << Text(b, "version") << " (protocol " << Num(b, "protocol_version", 0)
    << ")\n"
    << "socket   " << Text(b, "socket") << "\n";
  const json& groups = List(doc, "groups");
  if (groups.empty()) o << "groups   none\n";
  for (const json& g : groups) {
    o << "\ngroup " << Text(g, "name") << "  generation " << Num(g, "generation", uint64_t{0})
      << "  world size " << Num(g, "world_size", 0) << "  " << Text(g, "state")
      << (Flag(g, "adopted") ? " (adopted)" : "") << "  age " << Duration(Num(g, "age_s", 0.0))
      << "\n"
      << "  segment " << Text(g, "segment") << "  buffer "
      << Bytes(Num(g, "buffer_bytes", uint64_t{0})) << "\n";
    if (!Field(g, "failure_reason").is_null()) {
      o << "  failure: " << Text(g, "failure_reason") << "\n";
    }
    o << "  " << std::left << std::setw(5) << "rank" << std::setw(9) << "pid" << std::setw(6)
      << "alive" << std::setw(10) << "published" << std::setw(16) << "device" << std::setw(24)
      << "ops" << std::setw(28) << "bytes"
      << "last progress\n";
    for (const json& m : List(g, "members")) {
      const json& lp = Field(m, "last_progress_s");
      o << "  " << std::left << std::setw(5) << Num(m, "rank", -1) << std::setw(9)
        << Num(m, "pid", 0) << std::setw(6) << (Flag(m, "alive") ? "yes" : "NO") << std::setw(10)
        << (Flag(m, "published") ? "yes" : "no") << std::setw(16) << Text(m, "device")
        << std::setw(24) << Codecs(Field(m, "ops"), false) << std::setw(28)
        << Codecs(Field(m, "bytes"), true)
        << (lp.is_number() ? Duration(lp.get<double>()) + " ago" : "never") << "\n";
    }
    const json& missing = List(g, "missing_ranks");
    if (!missing.empty()) {
      o << "  missing ranks:";
      for (const auto& r : missing) o << " " << (r.is_number() ? std::to_string(r.get<int>()) : "?");
      o << "\n";
    }
  }
  const json& problems = List(doc, "problems");
  if (!problems.empty()) {
    o << "\nproblems\n";
    for (const json& p : problems) {
      o << "  [" << Text(p, "severity") << "] " << Text(p, "message", "") << "\n"
        << "    fix: " << Text(p, "remedy", "") << "\n";
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
