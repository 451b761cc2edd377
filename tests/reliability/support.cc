#include "tests/reliability/support.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "ipc/names.h"
#include "tests/e2e/harness.h"

namespace qr::testing::reliability {

int OpenFds(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return pid == ::getpid() ? n - 1 : n;  // our own DIR's descriptor
}

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

std::vector<std::string> OurShmObjects() {
  return ShmObjectsContaining(ipc::UserPrefix(::getuid()).substr(1));
}

size_t ShmEntries() {
  size_t n = 0;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

ShmSpace DevShmSpace() {
  struct statvfs v {};
  if (::statvfs("/dev/shm", &v) != 0) return {};
  return {static_cast<uint64_t>(v.f_blocks) * v.f_frsize,
          static_cast<uint64_t>(v.f_bavail) * v.f_frsize};
}

uint64_t AllocatedBytes(const std::string& name) {
  struct stat st {};
  if (::stat(("/dev/shm/" + name).c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

Summary Summarise(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

std::string MiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

bool WaitUntil(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace qr::testing::reliability
