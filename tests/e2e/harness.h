// End-to-end test harness: one test binary is both the gtest driver and its
// own worker processes (fork+exec of itself with --worker=<name>), plus a
// fixture that runs a private broker for each test.
//
//   int main(int argc, char** argv) {
//     return qr::testing::E2eMain(argc, argv, {{"sweep", &SweepWorker}});
//   }
//   TEST_F(E2eTest, Something) {
//     auto codes = RunWorkers("sweep", 2, {{"cases", "FP:fp16:8"}});
//   }
#ifndef QR_TESTS_E2E_HARNESS_H_
#define QR_TESTS_E2E_HARNESS_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "tests/util/process.h"

namespace qr::testing {

// --key=value arguments of a worker.
class WorkerArgs {
 public:
  explicit WorkerArgs(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  std::string Get(const std::string& key, const std::string& fallback = "") const;
  int64_t GetInt(const std::string& key, int64_t fallback = 0) const;
  int rank() const { return static_cast<int>(GetInt("rank", -1)); }
  int world_size() const { return static_cast<int>(GetInt("ws", 0)); }
  std::string group() const { return Get("group"); }
  std::string dir() const { return Get("dir"); }  // the test's scratch dir

 private:
  std::map<std::string, std::string> values_;
};

// A worker returns its process exit code (0 = pass).
using WorkerFn = int (*)(const WorkerArgs& args);

// Runs the named worker when argv has --worker=<name>, else gtest. The test
// binary's BUILD passes --broker=<path of qr-broker>, which BrokerBinary()
// (tests/util/process.h) then returns.
int E2eMain(int argc, char** argv, const std::map<std::string, WorkerFn>& workers);

// Per-test broker and scratch directory. Workers get QR_BROKER_SOCKET of
// this broker and QR_BROKER_AUTOSTART=0.
class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A group name unique to this test and process, holding token_
  // (tests/util/process.h UniqueGroup).
  std::string UniqueGroup(const std::string& tag);
  // Spawns `world_size` workers of `worker` for `group`; returns the pids.
  std::vector<pid_t> SpawnWorkers(const std::string& worker, const std::string& group,
                                  int world_size,
                                  const std::map<std::string, std::string>& extra = {},
                                  const std::vector<std::string>& env = {});
  pid_t SpawnWorker(const std::string& worker, const std::string& group, int rank, int world_size,
                    const std::map<std::string, std::string>& extra = {},
                    const std::vector<std::string>& env = {});
  // Spawn + wait; expects every exit code to be 0.
  void RunWorkers(const std::string& worker, int world_size,
                  const std::map<std::string, std::string>& extra = {},
                  std::chrono::milliseconds timeout = std::chrono::seconds(240));

  // Rank 0's fingerprint file of `group` (FingerprintPath), after expecting
  // every other rank's to be the same.
  std::string ExpectSameOutputsOnEveryRank(const std::string& group, int world_size);

  BrokerProcess broker_;
  std::string dir_;  // scratch dir for this test
  std::string socket_;
  std::string token_;  // random, per test: names never collide across tests
};

// Joins with retries while the previous generation of the group is still
// failing (kPeerFailed) or the rank is still taken (kAlreadyExists), up to
// `patience`.
StatusOr<std::unique_ptr<Communicator>> JoinWithRetry(const JoinOptions& o,
                                                      std::chrono::milliseconds patience);

// A reusable barrier for ranks that are threads of one process.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// Names in /dev/shm that contain `needle`.
std::vector<std::string> ShmObjectsContaining(const std::string& needle);

// Writes `text` to path (whole file); false on error.
bool WriteFile(const std::string& path, const std::string& text);
std::string ReadFile(const std::string& path);

// 64-bit FNV-1a of a buffer (ranks compare outputs through it).
uint64_t Fingerprint(const void* data, size_t bytes);

// Where a worker writes the fingerprints of its outputs (one line per call)
// for the driver to compare across ranks (E2eTest::ExpectSameOutputsOnEveryRank).
std::string FingerprintPath(const WorkerArgs& a);

}  // namespace qr::testing

#endif  // QR_TESTS_E2E_HARNESS_H_
