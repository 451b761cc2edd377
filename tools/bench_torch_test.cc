#include "tools/bench_torch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr::bench {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Rows as python/bench/symm_mem_bench.py's CsvOut writes them (its
// CSV_COLUMNS; the detail column quoted by Python's csv module when it holds
// a comma).
constexpr const char* kCsv =
    "bytes,dtype,mode,op,status,us,algbw_GBps,calls,reps,detail\n"
    "4096,fp16,graph,torch-one-shot,ok,3.125,1.31,50,200,\n"
    "4096,fp16,graph,torch-two-shot,refused,,,,,\"rank 0: RuntimeError: world size 1, not 2, 4 "
    "or 8\"\n"
    "4096,fp16,graph,torch-nccl,ok,9.000,0.46,50,200,\n"
    "1048576,bf16,eager,torch-two-shot,ok,12.500,83.89,50,40,\n"
    "1048576,bf16,eager,torch-one-shot,wrong,7.000,,50,40,max diff 2\n";

TEST(BenchTorchTest, OkRowsOfTheTwoOpsBecomeBaselinesTheRestIsSaid) {
  ASSERT_OK_AND_ASSIGN(TorchRows t, ParseTorchCsv(kCsv));
  ASSERT_EQ(t.measurements.size(), 2u);  // torch-nccl is not a baseline here
  EXPECT_EQ(t.measurements[0].cell.bytes, 4096u);
  EXPECT_EQ(t.measurements[0].cell.algo, BenchAlgo::kTorchOneShot);
  EXPECT_EQ(t.measurements[0].cell.dtype, BenchDType::kFp16);
  EXPECT_EQ(t.measurements[0].cell.mode, BenchMode::kGraph);
  EXPECT_DOUBLE_EQ(t.measurements[0].us, 3.125);
  EXPECT_EQ(t.measurements[1].cell.algo, BenchAlgo::kTorchTwoShot);
  EXPECT_EQ(t.measurements[1].cell.dtype, BenchDType::kBf16);
  EXPECT_EQ(t.measurements[1].cell.mode, BenchMode::kEager);
  EXPECT_THAT(t.refused, ElementsAre(HasSubstr("4K fp16 graph torch-two-shot: refused: \"rank 0: "
                                               "RuntimeError: world size 1, not 2, 4 or 8\"")));
  EXPECT_THAT(t.failed, ElementsAre("1M bf16 eager torch-one-shot: wrong: max diff 2"));
}

TEST(BenchTorchTest, BadInputIsNamed) {
  EXPECT_THAT(ParseTorchCsv("").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseTorchCsv("bytes,dtype,mode,op,us\n").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'status'")));
  const std::string head = "bytes,dtype,mode,op,status,us,detail\n";
  EXPECT_THAT(ParseTorchCsv(head + "4096,fp8,graph,torch-one-shot,ok,1.0,\n").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("line 2: dtype 'fp8'")));
  EXPECT_THAT(ParseTorchCsv(head + "4096,fp16,graph,torch-one-shot,ok,,\n").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ok with us ''")));
  EXPECT_THAT(ParseTorchCsv(head + "4096,fp16\n").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("fields")));
}

TEST(BenchTorchTest, TheCommandAsksForTheSweepsCellsAtItsWorldSize) {
  ASSERT_OK_AND_ASSIGN(
      BenchOptions o,
      ParseBenchArgs({"--launch", "per-gpu", "--world-size", "1", "--sizes", "4K,1M", "--dtypes",
                      "bf16cast,fp16", "--torch-symm", "--torch-python", "python3.12"}));
  EXPECT_THAT(TorchCommand(o, "/tmp/t.csv"),
              ElementsAre("/usr/bin/env", "python3.12", "python/bench/symm_mem_bench.py", "--ops",
                          "one-shot,two-shot", "--sizes", "4096,1048576", "--dtypes", "fp16,bf16",
                          "--modes", "graph,eager", "--eager-max-size", "67108864", "--world-size",
                          "1", "--timeout", "530", "--csv", "/tmp/t.csv"));
}

}  // namespace
}  // namespace qr::bench
