#include "tools/qrctl_render.h"

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>

#include "common/bytes.h"
#include "common/utf8.h"
#include "ipc/group_types.h"

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

// The number at key if it is one that T can hold, else fallback.
template <typename T>
T Num(const json& obj, const char* key, T fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  using Limits = std::numeric_limits<T>;
  if (it->is_number_unsigned()) {
    uint64_t v = it->template get<uint64_t>();
    return v <= static_cast<uint64_t>(Limits::max()) ? static_cast<T>(v) : fallback;
  }
  if (it->is_number_integer()) {
    int64_t v = it->template get<int64_t>();
    if (v < 0 && !Limits::is_signed) return fallback;
    if (Limits::is_integer && Limits::is_signed &&
        (v < static_cast<int64_t>(Limits::lowest()) || v > static_cast<int64_t>(Limits::max()))) {
      return fallback;
    }
    return static_cast<T>(v);
  }
  double v = it->template get<double>();
  if (!(v >= static_cast<double>(Limits::lowest()) && v <= static_cast<double>(Limits::max()))) {
    return fallback;  // NaN, or out of T's range
  }
  return static_cast<T>(v);
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

std::string Duration(double s) {
  if (!(s >= 0)) s = 0;  // NaN and negatives from a confused peer
  s = std::min(s, 1e9);
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

std::string Codecs(const json& counters, bool bytes) {
  std::string s;
  for (const char* c : ipc::kCounterNames) {
    uint64_t v = Num(counters, c, uint64_t{0});
    if (v == 0) continue;
    s += (s.empty() ? "" : " ") + std::string(c) + "=" +
         (bytes ? FormatBytes(v, ByteStyle::kRounded) : std::to_string(v));
  }
  return s.empty() ? "-" : s;
}

}  // namespace

std::string DumpStatus(const json& doc, int indent) {
  return doc.dump(indent, ' ', false, json::error_handler_t::replace);
}

int ExitCodeFor(const json& doc) {
  if (!Field(doc, "broker").is_object()) return kExitNoBroker;
  return List(doc, "problems").empty() ? kExitHealthy : kExitDegraded;
}

std::string RenderStatusText(const json& doc) {
  std::ostringstream o;
  const json& b = Field(doc, "broker");
  o << "broker   pid " << Num(b, "pid", 0) << ", up " << Duration(Num(b, "uptime_s", 0.0))
    << ", version " << Text(b, "version") << " (protocol " << Num(b, "protocol_version", 0) << ")\n"
    << "socket   " << Text(b, "socket") << "\n";
  const json& groups = List(doc, "groups");
  if (groups.empty()) o << "groups   none\n";
  for (const json& g : groups) {
    o << "\ngroup " << Text(g, "name") << "  generation " << Num(g, "generation", uint64_t{0})
      << "  world size " << Num(g, "world_size", 0) << "  " << Text(g, "state")
      << (Flag(g, "adopted") ? " (adopted)" : "") << "  age " << Duration(Num(g, "age_s", 0.0))
      << "\n"
      << "  segment " << Text(g, "segment") << "  buffer "
      << FormatBytes(Num(g, "buffer_bytes", uint64_t{0}), ByteStyle::kRounded) << "\n";
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
      for (const auto& r : missing) {
        o << " " << (r.is_number_integer() ? r.dump() : "?");
      }
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

}  // namespace qr::tools
