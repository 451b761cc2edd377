// qr-reliability's pieces every subcommand uses: small measurements of
// processes and /dev/shm, a broker of our own, a scratch directory.
#ifndef QR_TESTS_RELIABILITY_SUPPORT_H_
#define QR_TESTS_RELIABILITY_SUPPORT_H_

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "ipc/broker_client.h"
#include "nlohmann/json.hpp"
#include "tests/util/process.h"

namespace qr::testing::reliability {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// --- small measurements -------------------------------------------------------

// Open descriptors of `pid` (ours without the listing's own).
int OpenFds(pid_t pid);
long RssKiB(pid_t pid);
// This uid's quickreduce objects in /dev/shm (names without the slash).
std::vector<std::string> OurShmObjects();
size_t ShmEntries();

struct ShmSpace {
  uint64_t total = 0, free = 0;
};
ShmSpace DevShmSpace();
// Bytes the named /dev/shm object holds (allocated blocks, not its size).
uint64_t AllocatedBytes(const std::string& name);

struct Summary {
  double min = 0, median = 0, max = 0;
};
Summary Summarise(std::vector<double> v);
std::string MiB(uint64_t bytes);
bool WaitUntil(const std::function<bool()>& pred, milliseconds timeout);
std::vector<int> ParseList(const std::string& text);

// --- the broker ---------------------------------------------------------------

// A broker of our own on a private socket, which every client of this
// process and of its children uses (QR_BROKER_SOCKET, no autostart).
class Broker {
 public:
  Broker(std::string binary, std::string dir, std::vector<std::string> env = {})
      : binary_(std::move(binary)), socket_(dir + "/broker.sock"), env_(std::move(env)) {
    ::setenv("QR_BROKER_SOCKET", socket_.c_str(), 1);
    ::setenv("QR_BROKER_AUTOSTART", "0", 1);
  }
  Status Start() {
    process_ = BrokerProcess(binary_, socket_, {}, env_);
    return process_.Start();
  }
  // Start, saying why on stderr when it fails.
  bool StartOrSay() {
    Status s = Start();
    if (!s.ok()) std::fprintf(stderr, "broker: %s\n", s.ToString().c_str());
    return s.ok();
  }
  void Kill() { process_.Signal(SIGKILL); }  // reaps it
  void Stop() { process_.Stop(); }
  pid_t pid() const { return process_.pid(); }
  bool running() const { return process_.pid() > 0 && ::kill(process_.pid(), 0) == 0; }
  const std::string& socket() const { return socket_; }
  // The group's entry in the status document (null when absent or no answer).
  nlohmann::json Group(const std::string& name) const {
    auto text = ipc::QueryStatus(socket_, milliseconds(2000));
    if (!text.ok()) return nullptr;
    nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded() || !doc.contains("groups")) return nullptr;
    for (const auto& g : doc["groups"]) {
      if (g.value("name", "") == name) return g;
    }
    return nullptr;
  }
  bool Answers() const { return ipc::QueryStatus(socket_, milliseconds(2000)).ok(); }

 private:
  std::string binary_, socket_;
  std::vector<std::string> env_;
  BrokerProcess process_;
};

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/qr-rel-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    const std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace qr::testing::reliability

#endif  // QR_TESTS_RELIABILITY_SUPPORT_H_
