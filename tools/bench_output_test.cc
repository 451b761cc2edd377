#include "tools/bench_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/util/status_matchers.h"
#include "tools/bench_torch.h"

namespace qr::bench {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t K = 1024;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

Measurement Meas(BenchDType d, BenchAlgo a, double us) {
  return {{4 * K, d, BenchMode::kGraph, a, Codec::kFp}, us};
}

// PyTorch's rows, timed before the sweep, join the sweep's groups: bf16's
// serve bf16cast (torch has no cast), other sizes and modes stay out.
TEST(BenchOutputTest, TorchRowsJoinTheirGroupAndGoIntoEveryOutput) {
  ASSERT_OK_AND_ASSIGN(
      BenchOptions o, ParseBenchArgs({"--launch", "per-gpu", "--world-size", "2", "--regimes", "FP",
                                      "--csv", TmpPath("out.csv"), "--json", TmpPath("out.json")}));
  BenchHeader header;
  header.world_size = 2;
  BenchOutput out(o, header);
  ASSERT_OK(out.Open());
  out.AddBaselines({Meas(BenchDType::kBf16, BenchAlgo::kTorchOneShot, 3.0),
                    Meas(BenchDType::kFp16, BenchAlgo::kTorchTwoShot, 9.0)});
  std::vector<Measurement> group = {Meas(BenchDType::kBf16Cast, BenchAlgo::kNccl, 10.0),
                                    Meas(BenchDType::kBf16Cast, BenchAlgo::kOneShot, 4.0)};
  out.Flush(group);
  EXPECT_TRUE(group.empty());
  std::vector<std::string> algos;
  for (const BenchRow& r : out.rows()) {
    algos.push_back(BenchAlgoName(r.algo));
    EXPECT_EQ(r.dtype, BenchDType::kBf16Cast);
  }
  EXPECT_THAT(algos, ElementsAre("one-shot", "policy", "nccl", "torch-one-shot"));
  EXPECT_EQ(out.rows()[0].best_peer, "torch-one-shot");
  EXPECT_DOUBLE_EQ(out.rows()[0].ratio_vs_best_peer, 4.0 / 3.0);
  ASSERT_OK(out.Finish(1.0));
  ASSERT_OK_AND_ASSIGN(const std::string csv, ReadTextFile(TmpPath("out.csv")));
  EXPECT_THAT(csv, HasSubstr("4096,bf16cast,graph,torch-one-shot,-,3.000"));
  EXPECT_THAT(csv, HasSubstr("4096,bf16cast,graph,one-shot,FP,4.000,"));
  ASSERT_OK_AND_ASSIGN(const std::string json, ReadTextFile(TmpPath("out.json")));
  EXPECT_THAT(json, HasSubstr("\"best_peer\": \"torch-one-shot\""));
}

TEST(BenchOutputTest, TorchRefusalsAreNotesFailuresAreFailures) {
  TorchRows rows;
  rows.measurements = {Meas(BenchDType::kFp16, BenchAlgo::kTorchOneShot, 3.0)};
  rows.refused = {"4K fp16 graph torch-two-shot: refused: Not implemented for world_size=1"};
  rows.failed = {"4K fp16 graph torch-one-shot: wrong"};
  BenchHeader h;
  EXPECT_EQ(RecordTorchRows(rows, h).size(), 1u);
  EXPECT_THAT(h.notes, ElementsAre(HasSubstr("torch refused: 4K fp16 graph torch-two-shot")));
  EXPECT_THAT(h.failures, ElementsAre("torch: 4K fp16 graph torch-one-shot: wrong"));
  BenchHeader none;
  EXPECT_TRUE(RecordTorchRows(TorchRows{}, none).empty());
  EXPECT_THAT(none.failures, ElementsAre("torch baseline: no rows"));
  BenchHeader failed;
  EXPECT_TRUE(RecordTorchRows(InternalError("exited with 1"), failed).empty());
  EXPECT_THAT(failed.failures, Contains(HasSubstr("torch baseline: INTERNAL: exited with 1")));
}

}  // namespace
}  // namespace qr::bench
