#include "tools/bench_nccl_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qr::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

BenchRow Row(size_t bytes, BenchAlgo algo, const std::string& regime, double us,
             BenchDType dtype = BenchDType::kFp16) {
  BenchRow r;
  r.bytes = bytes;
  r.algo = algo;
  r.regime = regime;
  r.us = us;
  r.dtype = dtype;
  r.mode = BenchMode::kGraph;
  return r;
}

TEST(NcclTableTest, BusBandwidthIsNcclTestsAllReduceFactor) {
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(100, 2), 100);  // 2 (2-1)/2 = 1
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(100, 4), 150);  // 2 (4-1)/4 = 1.5
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(100, 8), 175);  // 2 (8-1)/8 = 1.75
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(100, 1), 0);    // one rank moves nothing
}

TEST(NcclTableTest, TimeColumnAsNcclTestsPrintsIt) {
  EXPECT_EQ(NcclTestsTime(18.456), "  18.46");
  EXPECT_EQ(NcclTestsTime(123.44), "  123.4");
  EXPECT_EQ(NcclTestsTime(12345.6), "  12346");
}

TEST(NcclTableTest, LineHasNcclTestsColumns) {
  // 1 MiB fp16 in 10 us at world size 4: algbw 104.86 GB/s, busbw 157.29.
  const std::string line = NcclTestsLine(Row(1 << 20, BenchAlgo::kTwoShot, "INT4", 10.0), 4);
  EXPECT_EQ(
      line,
      "     1048576        524288      half     sum      -1    10.00  104.86  157.29    N/A\n");
  const std::string bf16 =
      NcclTestsLine(Row(4096, BenchAlgo::kNccl, "-", 5.0, BenchDType::kBf16), 2);
  EXPECT_THAT(bf16, HasSubstr("  bfloat16  "));
  EXPECT_THAT(bf16, HasSubstr("   0.82    0.82    N/A"));
}

TEST(NcclTableTest, OneBlockPerVariantPolicyRowsLeftOut) {
  std::vector<BenchRow> rows = {
      Row(1 << 20, BenchAlgo::kTwoShot, "FP", 20.0), Row(1 << 20, BenchAlgo::kOneShot, "FP", 15.0),
      Row(1 << 20, BenchAlgo::kPolicy, "FP", 15.0),  Row(1 << 20, BenchAlgo::kNccl, "-", 30.0),
      Row(2 << 20, BenchAlgo::kTwoShot, "FP", 35.0), Row(2 << 20, BenchAlgo::kNccl, "-", 50.0),
  };
  const std::string t = NcclTestsTable(rows, 2);
  EXPECT_THAT(t, HasSubstr("# quickreduce two-shot FP, fp16, graph, world size 2"));
  EXPECT_THAT(t, HasSubstr("# quickreduce one-shot (exact), fp16, graph"));
  EXPECT_THAT(t, HasSubstr("# NCCL ncclAllReduce, fp16, graph"));
  EXPECT_THAT(t, HasSubstr("#       size         count      type   redop    root     time   algbw"
                           "   busbw #wrong\n"));
  // Two-shot FP's block holds both sizes, in order, before NCCL's block.
  const size_t two_shot = t.find("# quickreduce two-shot FP");
  const size_t nccl = t.find("# NCCL");
  const size_t one_mib = t.find("     1048576 ", two_shot);
  const size_t two_mib = t.find("     2097152 ", two_shot);
  EXPECT_LT(one_mib, two_mib);
  EXPECT_LT(two_mib, nccl);
  // Three blocks (the policy row is not a fourth) and 5 data lines.
  auto occurrences = [&t](const std::string& what) {
    size_t n = 0;
    for (size_t p = t.find(what); p != std::string::npos; p = t.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(occurrences("(nccl-tests all_reduce_perf columns)"), 3u);
  EXPECT_EQ(occurrences("    N/A\n"), 5u);
  EXPECT_THAT(t, Not(HasSubstr("policy")));
}

TEST(NcclTableTest, EveryPeerHasABlockOfItsOwn) {
  const std::vector<BenchRow> rows = {
      Row(4096, BenchAlgo::kNccl, "-", 10.0), Row(4096, BenchAlgo::kNcclSymm, "-", 5.0),
      Row(4096, BenchAlgo::kTorchOneShot, "-", 6.0), Row(4096, BenchAlgo::kTorchTwoShot, "-", 8.0)};
  const std::string t = NcclTestsTable(rows, 1);
  EXPECT_THAT(t, HasSubstr("# NCCL ncclAllReduce, fp16, graph, world size 1"));
  EXPECT_THAT(t, HasSubstr("# NCCL ncclAllReduce, symmetric (window-registered), fp16, graph"));
  EXPECT_THAT(t, HasSubstr("# PyTorch symm_mem one_shot_all_reduce, fp16, graph"));
  EXPECT_THAT(t, HasSubstr("# PyTorch symm_mem two_shot_all_reduce_, fp16, graph"));
  // World size 1 moves nothing between GPUs: busbw 0, as nccl-tests says.
  EXPECT_THAT(t, HasSubstr("   5.00    0.82    0.00    N/A\n"));
}

}  // namespace
}  // namespace qr::bench
