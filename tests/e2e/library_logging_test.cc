// libquickreduce logs through its own logger, as a host program sees it: this
// binary links the shared library (C ABI only) and spdlog, like a C++ server
// that has its own logging. Each rank is a forked child (the library's logger
// reads QR_LOG_LEVEL at its first use, so every child starts afresh) whose
// stderr goes to a file the test reads: QR_LOG_LEVEL=off silences a join that
// logs at debug, and a host program's default logger (its sinks and level),
// spdlog's registry and spdlog::set_level neither change nor are changed.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "comm/quickreduce.h"
#include "tests/util/process.h"

namespace qr::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Rank `rank` of the 2-rank host-backend group `group` (which must outlive
// the options).
qr_join_options Options(const std::string& group, int rank) {
  qr_join_options o;
  std::memset(&o, 0, sizeof(o));
  o.group = group.c_str();
  o.rank = rank;
  o.world_size = 2;
  o.device = QR_DEVICE_HOST;
  o.timeout_ms = 20000;
  return o;
}

// One rank's life in the host program: join, one all-reduce, leave. 0 when
// all of it succeeded, else a code saying which step failed.
int JoinReduceLeave(const std::string& group, int rank) {
  const qr_join_options o = Options(group, rank);
  qr_comm* c = nullptr;
  if (qr_join(&o, &c) != QR_OK) {
    std::fprintf(stdout, "rank %d: join: %s\n", rank, qr_last_error());
    return 20;
  }
  std::vector<uint16_t> in(4096, 0x3c00), out(4096);  // fp16 1.0
  if (qr_all_reduce_ex(c, in.data(), out.data(), in.size(), QR_FLOAT16, QR_REGIME_FP, 0,
                       nullptr) != QR_OK ||
      out[17] != 0x4000) {  // 2.0
    std::fprintf(stdout, "rank %d: all-reduce: %s\n", rank, qr_last_error());
    return 21;
  }
  return qr_leave(c) == QR_OK ? 0 : 22;
}

class LibraryLoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_ = UniqueToken();
    socket_ = "/tmp/qr-logging-" + token_ + ".sock";
    broker_ = BrokerProcess(BrokerBinary(), socket_);
    Status started = broker_.Start();
    ASSERT_TRUE(started.ok()) << started;
    ::setenv("QR_BROKER_SOCKET", socket_.c_str(), 1);
    ::setenv("QR_BROKER_AUTOSTART", "0", 1);
  }
  void TearDown() override {
    broker_.Stop();
    ::unlink(socket_.c_str());
    ::unlink((socket_ + ".lock").c_str());
  }

  // Forks both ranks of a fresh group; in each, sets QR_LOG_LEVEL (unset when
  // empty) and QR_LOG_FILE (unset when empty), sends stderr to a file and
  // runs `body`. Returns the ranks' stderr; fails the test when a rank did
  // not exit 0. `pids_out`, when given, receives the ranks' pids.
  std::vector<std::string> RunRanks(const std::string& level,
                                    const std::function<int(const std::string&, int)>& body,
                                    const std::string& log_file = "",
                                    std::vector<pid_t>* pids_out = nullptr) {
    const std::string group = "logging-" + token_ + "-" + std::to_string(runs_++);
    std::vector<pid_t> pids;
    std::vector<std::string> paths;
    for (int rank = 0; rank < 2; ++rank) {
      paths.push_back(std::string(std::getenv("TEST_TMPDIR")) + "/" + group + "-r" +
                      std::to_string(rank) + ".stderr");
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      if (pid == 0) {
        if (level.empty()) {
          ::unsetenv("QR_LOG_LEVEL");
        } else {
          ::setenv("QR_LOG_LEVEL", level.c_str(), 1);
        }
        if (log_file.empty()) {
          ::unsetenv("QR_LOG_FILE");
        } else {
          ::setenv("QR_LOG_FILE", log_file.c_str(), 1);
        }
        const int fd = ::open(paths.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) ::_exit(10);
        const int rc = body(group, rank);
        std::fflush(nullptr);
        ::_exit(rc);
      }
      EXPECT_GT(pid, 0);
      pids.push_back(pid);
    }
    if (pids_out != nullptr) *pids_out = pids;
    const std::vector<int> codes = WaitAll(pids, std::chrono::seconds(60));
    std::vector<std::string> err;
    for (int rank = 0; rank < 2; ++rank) {
      err.push_back(Slurp(paths[rank]));
      EXPECT_EQ(codes[rank], 0) << "rank " << rank << " stderr:\n" << err.back();
    }
    return err;
  }

  std::string token_, socket_;
  BrokerProcess broker_;
  int runs_ = 0;
};

TEST_F(LibraryLoggingTest, LevelOffSilencesWhatDebugShows) {
  // The host program's own spdlog level does not govern the library's logger.
  auto run = [](const std::string& group, int rank) {
    spdlog::set_level(spdlog::level::off);
    return JoinReduceLeave(group, rank);
  };
  for (const std::string& err : RunRanks("debug", run)) {
    EXPECT_THAT(err, HasSubstr("[quickreduce:"));
    EXPECT_THAT(err, HasSubstr("[info] quickreduce " + std::string(qr_version()) +
                               " joined group logging-"));
  }
  for (const std::string& err : RunRanks("off", run)) EXPECT_EQ(err, "");
  // The default level (warn) says nothing about a join that went well.
  for (const std::string& err : RunRanks("", run)) EXPECT_EQ(err, "");
}

// NCCL's "Init COMPLETE" line: one line per join at info saying what runs.
TEST_F(LibraryLoggingTest, JoinSaysVersionBackendPlatformRegimeWorldSizeAndRank) {
  std::vector<std::string> err = RunRanks("info", JoinReduceLeave);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(err[rank], HasSubstr("[info] quickreduce " + std::string(qr_version()) +
                                     " joined group logging-"));
    EXPECT_THAT(err[rank], HasSubstr(" rank " + std::to_string(rank) +
                                     " of world size 2: backend host, platform host, device "
                                     "host, regime FP, one-shot up to "));
  }
}

// QR_LOG_FILE as NCCL_DEBUG_FILE: %h and %p name one file per process, which
// gets what stderr would have; stderr stays empty.
TEST_F(LibraryLoggingTest, LogFileNamesHostAndPid) {
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  const std::string dir = std::getenv("TEST_TMPDIR");
  std::vector<pid_t> pids;
  std::vector<std::string> err = RunRanks("info", JoinReduceLeave, dir + "/qr.%h.%p.log", &pids);
  ASSERT_EQ(pids.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(err[rank], "");
    const std::string path = dir + "/qr." + host + "." + std::to_string(pids[rank]) + ".log";
    const std::string text = Slurp(path);
    EXPECT_THAT(text, HasSubstr("[quickreduce:" + std::to_string(pids[rank]) + "] [info]")) << path;
    EXPECT_THAT(text, HasSubstr(" rank " + std::to_string(rank) + " of world size 2: "));
  }
}

// A file that cannot be opened leaves the lines on stderr, with a warning.
TEST_F(LibraryLoggingTest, UnopenableLogFileFallsBackToStderr) {
  const std::string bad = std::string(std::getenv("TEST_TMPDIR")) + "/no/such/dir/qr.%p.log";
  for (const std::string& err : RunRanks("info", JoinReduceLeave, bad)) {
    EXPECT_THAT(err, HasSubstr("[warning] QR_LOG_FILE: cannot open '"));
    EXPECT_THAT(err, HasSubstr("No such file or directory); logging to stderr"));
    EXPECT_THAT(err, HasSubstr(" of world size 2: backend host"));
  }
}

TEST_F(LibraryLoggingTest, BadLevelIsAJoinError) {
  auto run = [](const std::string& group, int rank) {
    const qr_join_options o = Options(group, rank);
    qr_comm* c = nullptr;
    if (qr_join(&o, &c) != QR_INVALID_ARGUMENT || c != nullptr) return 30;
    return std::strstr(qr_last_error(), "QR_LOG_LEVEL='chatty'") != nullptr ? 0 : 31;
  };
  RunRanks("chatty", run);
}

TEST_F(LibraryLoggingTest, HostProgramsDefaultLoggerIsUntouched) {
  auto run = [](const std::string& group, int rank) {
    std::ostringstream host_text;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(host_text);
    auto host = std::make_shared<spdlog::logger>("host", sink);
    spdlog::set_default_logger(host);
    spdlog::set_level(spdlog::level::trace);
    const int rc = JoinReduceLeave(group, rank);
    if (rc != 0) return rc;
    // The same logger, sinks and level: nothing replaced, nothing re-levelled.
    if (spdlog::default_logger() != host) return 40;
    if (host->level() != spdlog::level::trace) return 41;
    if (host->sinks().size() != 1 || host->sinks()[0] != sink) return 42;
    // Nothing of the library's went through it, nor into spdlog's registry:
    // the host may have a logger named "quickreduce" of its own.
    if (!host_text.str().empty()) {
      std::fprintf(stdout, "host logger got: %s\n", host_text.str().c_str());
      return 43;
    }
    if (spdlog::get("quickreduce") != nullptr) return 44;
    spdlog::register_logger(std::make_shared<spdlog::logger>("quickreduce", sink));
    spdlog::info("host line");
    return host_text.str().find("host line") != std::string::npos ? 0 : 45;
  };
  for (const std::string& err : RunRanks("debug", run)) {
    EXPECT_THAT(err, HasSubstr("joined group logging-"));
    EXPECT_THAT(err, Not(HasSubstr("host line")));
  }
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--broker=", 9) == 0) qr::testing::SetBrokerBinary(argv[i] + 9);
  }
  if (::access(qr::testing::BrokerBinary().c_str(), X_OK) != 0) {
    std::fprintf(stderr, "usage: %s --broker=<qr-broker>\n", argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
