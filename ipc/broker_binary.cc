#include "ipc/broker_binary.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "common/syscall.h"

namespace qr::ipc {
namespace {

constexpr char kBrokerName[] = "qr-broker";

std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string DirOf(const std::string& path) { return path.substr(0, path.rfind('/') + 1); }

// A directory that happens to be called qr-broker passes access(X_OK).
bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Rules 2-5 in order (broker_binary.h).
std::vector<std::string> Candidates(const BrokerSearch& s) {
  std::vector<std::string> out;
  const std::string in_runfiles = "/" + s.workspace + "/ipc/broker/" + kBrokerName;
  if (!s.executable.empty()) out.push_back(DirOf(s.executable) + kBrokerName);
  for (const std::string& root : s.runfiles_roots) {
    if (!root.empty()) out.push_back(root + in_runfiles);
  }
  if (!s.executable.empty()) {
    out.push_back(s.executable + ".runfiles" + in_runfiles);
    out.push_back(DirOf(s.executable) + "../ipc/broker/" + kBrokerName);
  }
  if (s.search_path) {
    // execvp's reading of $PATH: an empty entry is the current directory.
    size_t start = 0;
    while (start <= s.path.size()) {
      size_t end = s.path.find(':', start);
      if (end == std::string::npos) end = s.path.size();
      std::string dir = s.path.substr(start, end - start);
      out.push_back((dir.empty() ? std::string(".") : dir) + "/" + kBrokerName);
      start = end + 1;
    }
  }
  return out;
}

}  // namespace

BrokerSearch BrokerSearchFromEnvironment(std::string explicit_path, bool search_path) {
  BrokerSearch s;
  s.explicit_path = std::move(explicit_path);
  s.executable = SelfExecutablePath();
  for (const char* root : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    std::string dir = Getenv(root);
    if (!dir.empty()) s.runfiles_roots.push_back(std::move(dir));
  }
  if (std::string ws = Getenv("TEST_WORKSPACE"); !ws.empty()) s.workspace = ws;
  s.search_path = search_path;
  const char* path = std::getenv("PATH");
  s.path = path != nullptr ? path : "/bin:/usr/bin";
  return s;
}

StatusOr<std::string> FindBrokerBinary(const BrokerSearch& search) {
  if (!search.explicit_path.empty()) return search.explicit_path;
  const std::vector<std::string> candidates = Candidates(search);
  for (const std::string& c : candidates) {
    if (!IsExecutableFile(c)) continue;
    char resolved[PATH_MAX];
    return std::string(::realpath(c.c_str(), resolved) != nullptr ? resolved : c);
  }
  std::string looked;
  for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
  return UnavailableError(std::string("no executable ") + kBrokerName + " found" +
                          (looked.empty() ? "" : " (looked at " + looked + ")"));
}

}  // namespace qr::ipc
