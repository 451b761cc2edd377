// Eligibility is a pure function of the message (issue 27 item 1), seen
// across real processes through the C ABI: a member is SIGKILLed while the
// others sit between calls; every survivor's qr_should_all_reduce and
// qr_should_all_reduce_ex answers over a grid of (bytes, dtype, regime, cast)
// stay exactly what they were before the death, both while the abort word is
// up and after the failure was observed, and its next qr_all_reduce returns
// QR_PEER_FAILED (qr_check too). Survivors that answered differently would
// route one all-reduce to different backends and the rank on the other
// backend would hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "comm/quickreduce.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

using std::chrono::milliseconds;

// One character per question, '1' or '0': the configured rule, then every
// regime with and without the bf16 cast, for sizes around the limits.
std::string Answers(const qr_comm* c) {
  const size_t sizes[] = {0, 8, 16, 4096, 1 << 20, 16 << 20, size_t{2} << 30, size_t{3} << 30};
  std::string a;
  for (size_t bytes : sizes) {
    for (qr_dtype dtype : {QR_FLOAT16, QR_BFLOAT16}) {
      a += qr_should_all_reduce(c, bytes, dtype) ? '1' : '0';
      for (int regime = QR_REGIME_FP; regime <= QR_REGIME_NONE; ++regime) {
        for (int cast : {0, 1}) {
          a += qr_should_all_reduce_ex(c, bytes, dtype, static_cast<qr_regime>(regime), cast) ? '1'
                                                                                              : '0';
        }
      }
    }
  }
  return a;
}

std::string PathOf(const WorkerArgs& a, const std::string& what, int rank) {
  return a.dir() + "/" + a.group() + "-" + what + "-r" + std::to_string(rank);
}

#define WORKER_EXPECT(cond, code, ...)                  \
  do {                                                  \
    if (!(cond)) {                                      \
      std::fprintf(stderr, "rank %d: ", a.rank());      \
      std::fprintf(stderr, __VA_ARGS__);                \
      std::fprintf(stderr, " (%s)\n", qr_last_error()); \
      return code;                                      \
    }                                                   \
  } while (0)

// Joins, all-reduces once, records its answers, waits (between calls) until
// the driver has killed the victim, then asks again and calls.
int EligibilityWorker(const WorkerArgs& a) {
  const std::string group = a.group();
  qr_join_options o = {nullptr, group.c_str(), a.rank(), a.world_size(), QR_DEVICE_HOST, 30000};
  qr_comm* c = nullptr;
  WORKER_EXPECT(qr_join(&o, &c) == QR_OK, 2, "join");
  std::vector<uint16_t> in(8192), out(in.size());
  demo::FillInput(DType::kFloat16, a.rank(), 7, static_cast<int64_t>(in.size()), in.data());
  WORKER_EXPECT(qr_all_reduce(c, in.data(), out.data(), in.size(), QR_FLOAT16, nullptr) == QR_OK, 3,
                "first all-reduce");
  const std::string before = Answers(c);
  // A grid of only "no" would prove nothing.
  WORKER_EXPECT(before.find('1') != std::string::npos && before.find('0') != std::string::npos, 4,
                "answers before the kill are all alike: %s", before.c_str());
  WORKER_EXPECT(WriteFile(PathOf(a, "ready", a.rank()), "1\n"), 5, "ready file");
  if (a.rank() == a.GetInt("victim", -1)) {
    std::this_thread::sleep_for(std::chrono::seconds(120));  // killed here
    return 6;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::access((a.dir() + "/" + group + "-killed").c_str(), F_OK) != 0) {
    WORKER_EXPECT(std::chrono::steady_clock::now() < deadline, 7, "never told of the kill");
    std::this_thread::sleep_for(milliseconds(2));
  }
  // The broker raises the abort word when it sees the death; ask while it is
  // up but no call has observed it yet.
  std::this_thread::sleep_for(milliseconds(300));
  const std::string while_aborted = Answers(c);
  WORKER_EXPECT(while_aborted == before, 8, "answers changed after the kill:\n  %s\n  %s",
                before.c_str(), while_aborted.c_str());
  const qr_status s = qr_all_reduce(c, in.data(), out.data(), in.size(), QR_FLOAT16, nullptr);
  WORKER_EXPECT(s == QR_PEER_FAILED, 9, "next call returned %s", qr_status_name(s));
  const std::string after = Answers(c);
  WORKER_EXPECT(after == before, 10, "answers changed after the failed call:\n  %s\n  %s",
                before.c_str(), after.c_str());
  WORKER_EXPECT(qr_check(c) == QR_PEER_FAILED, 11, "check");
  WORKER_EXPECT(qr_all_reduce_ex(c, in.data(), out.data(), in.size(), QR_FLOAT16, QR_REGIME_FP, 0,
                                 nullptr) == QR_PEER_FAILED,
                12, "forced-regime call after the failure");
  qr_leave(c);  // the group is failed; leaving still frees
  return 0;
}

class EligibilityFaultTest : public E2eTest {
 protected:
  void KillOneBetweenCalls(int world_size, int victim) {
    const std::string group = UniqueGroup("elig" + std::to_string(world_size));
    std::vector<pid_t> pids =
        SpawnWorkers("eligibility", group, world_size, {{"victim", std::to_string(victim)}});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < world_size; ++r) {
      const std::string p = dir_ + "/" + group + "-ready-r" + std::to_string(r);
      while (::access(p.c_str(), F_OK) != 0) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank " << r << " never ready";
        std::this_thread::sleep_for(milliseconds(5));
      }
    }
    ASSERT_EQ(::kill(pids[victim], SIGKILL), 0);
    ASSERT_EQ(*WaitExit(pids[victim], std::chrono::seconds(10)), 128 + SIGKILL);
    ASSERT_TRUE(WriteFile(dir_ + "/" + group + "-killed", "1\n"));
    pids.erase(pids.begin() + victim);
    const std::vector<int> codes = WaitAll(pids, std::chrono::seconds(120));
    for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "survivor " << i;
  }
};

TEST_F(EligibilityFaultTest, SurvivorsAnswerAsBeforeAndTheirNextCallFailsWs2) {
  KillOneBetweenCalls(2, 1);
}

TEST_F(EligibilityFaultTest, SurvivorsAnswerAsBeforeAndTheirNextCallFailsWs4) {
  KillOneBetweenCalls(4, 2);
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) {
  return qr::testing::E2eMain(argc, argv, {{"eligibility", &qr::testing::EligibilityWorker}});
}
