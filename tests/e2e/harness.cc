#include "tests/e2e/harness.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "common/syscall.h"

namespace qr::testing {
std::string WorkerArgs::Get(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

int64_t WorkerArgs::GetInt(const std::string& key, int64_t fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : std::strtoll(it->second.c_str(), nullptr, 10);
}

int E2eMain(int argc, char** argv, const std::map<std::string, WorkerFn>& workers) {
  std::map<std::string, std::string> values;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--", 0) == 0 && a.find('=') != std::string::npos &&
        a.rfind("--gtest", 0) != 0) {
      const size_t eq = a.find('=');
      values[a.substr(2, eq - 2)] = a.substr(eq + 1);
      continue;
    }
    rest.push_back(argv[i]);
  }
  if (values.count("broker")) {
    char resolved[PATH_MAX];
    SetBrokerBinary(::realpath(values["broker"].c_str(), resolved) ? resolved : values["broker"]);
  }
  if (values.count("worker")) {
    auto it = workers.find(values["worker"]);
    if (it == workers.end()) {
      std::fprintf(stderr, "unknown worker '%s'\n", values["worker"].c_str());
      return 64;
    }
    return it->second(WorkerArgs(values));
  }
  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  ::testing::InitGoogleTest(&rest_argc, rest.data());
  return RUN_ALL_TESTS();
}

void E2eTest::SetUp() {
  ASSERT_EQ(::access(BrokerBinary().c_str(), X_OK), 0)
      << "no qr-broker at " << BrokerBinary() << "; the test needs --broker=<path to qr-broker>";
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = tmp != nullptr ? tmp : "/tmp";
  token_ = UniqueToken();
  dir_ = base + "/e2e-" + token_;
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0) << dir_ << ": " << std::strerror(errno);
  socket_ = dir_ + "/b.sock";
  if (socket_.size() > 100) {
    // sun_path holds 107 bytes; Bazel's TEST_TMPDIR can be deeper than that.
    socket_ = "/tmp/qr-e2e-" + token_ + ".sock";
  }
  ::setenv("QR_BROKER_SOCKET", socket_.c_str(), 1);
  ::setenv("QR_BROKER_AUTOSTART", "0", 1);
  // The broker logs every join and leave at info; thousands of cycles would
  // bury the test's own output.
  broker_ = BrokerProcess(BrokerBinary(), socket_, {}, {"QR_LOG_LEVEL=warn"});
  Status started = broker_.Start();
  ASSERT_TRUE(started.ok()) << started;
}

void Barrier::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen; });
}

std::vector<std::string> ShmObjectsContaining(const std::string& needle) {
  std::vector<std::string> found;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return found;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strstr(e->d_name, needle.c_str()) != nullptr) found.push_back(e->d_name);
  }
  ::closedir(d);
  return found;
}

void E2eTest::TearDown() {
  // Every group of this test has ended: whatever its members created in
  // /dev/shm (group segments, host buffers, also of killed members) must be
  // gone, removed by the members or by the broker's sweep.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<std::string> left = ShmObjectsContaining(token_);
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = ShmObjectsContaining(token_);
  }
  EXPECT_TRUE(left.empty()) << "leaked /dev/shm objects, e.g. " << left.front();
  broker_.Stop();
  ::unlink(socket_.c_str());
  ::unlink((socket_ + ".lock").c_str());
}

std::string E2eTest::UniqueGroup(const std::string& tag) {
  return ::qr::testing::UniqueGroup(tag, token_);
}

pid_t E2eTest::SpawnWorker(const std::string& worker, const std::string& group, int rank,
                           int world_size, const std::map<std::string, std::string>& extra,
                           const std::vector<std::string>& env) {
  std::vector<std::string> argv = {SelfExecutablePath(),
                                   "--worker=" + worker,
                                   "--broker=" + BrokerBinary(),
                                   "--group=" + group,
                                   "--rank=" + std::to_string(rank),
                                   "--ws=" + std::to_string(world_size),
                                   "--dir=" + dir_};
  for (const auto& [k, v] : extra) argv.push_back("--" + k + "=" + v);
  auto pid = Spawn(argv, env);
  EXPECT_TRUE(pid.ok()) << pid.status();
  return pid.ok() ? *pid : -1;
}

std::vector<pid_t> E2eTest::SpawnWorkers(const std::string& worker, const std::string& group,
                                         int world_size,
                                         const std::map<std::string, std::string>& extra,
                                         const std::vector<std::string>& env) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) {
    pids.push_back(SpawnWorker(worker, group, r, world_size, extra, env));
  }
  return pids;
}

void E2eTest::RunWorkers(const std::string& worker, int world_size,
                         const std::map<std::string, std::string>& extra,
                         std::chrono::milliseconds timeout) {
  const std::string group = UniqueGroup(worker + std::to_string(world_size));
  std::vector<int> codes = WaitAll(SpawnWorkers(worker, group, world_size, extra), timeout);
  for (size_t r = 0; r < codes.size(); ++r) {
    EXPECT_EQ(codes[r], 0) << worker << " rank " << r << " of " << world_size
                           << " failed (-1: killed at the deadline)";
  }
}

namespace {
std::string FingerprintFile(const std::string& dir, const std::string& group, int rank) {
  return dir + "/" + group + "-r" + std::to_string(rank) + ".fp";
}
}  // namespace

std::string FingerprintPath(const WorkerArgs& a) {
  return FingerprintFile(a.dir(), a.group(), a.rank());
}

std::string E2eTest::ExpectSameOutputsOnEveryRank(const std::string& group, int world_size) {
  const std::string first = ReadFile(FingerprintFile(dir_, group, 0));
  for (int r = 1; r < world_size; ++r) {
    EXPECT_EQ(ReadFile(FingerprintFile(dir_, group, r)), first)
        << group << ": rank " << r << "'s outputs differ from rank 0's";
  }
  return first;
}

StatusOr<std::unique_ptr<Communicator>> JoinWithRetry(const JoinOptions& o,
                                                      std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    StatusOr<std::unique_ptr<Communicator>> c = Communicator::Join(o);
    const StatusCode code = c.status().code();
    if (c.ok() || (code != StatusCode::kPeerFailed && code != StatusCode::kAlreadyExists) ||
        std::chrono::steady_clock::now() >= deadline) {
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return false;
    f << text;
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see half a file
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint64_t Fingerprint(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace qr::testing
