#include "tools/kernel_cost_peer_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/util/status_matchers.h"
#include "tools/kernel_cost_options.h"

namespace qr::cost {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t K = 1024;
constexpr size_t M = K * K;

TEST(KernelCostPeerStoreTest, CellsPutTheSmStoresBeforeTheirTmaCells) {
  ASSERT_OK_AND_ASSIGN(CostOptions o,
                       ParseCostArgs({"--peer-store", "--sizes", "64M,1M", "--peer-tma-chunks",
                                      "8K,4K", "--peer-blocks", "0,33"}));
  const std::vector<PeerStoreCell> cells = PlanPeerStoreCells(o);
  ASSERT_EQ(cells.size(), 2u * 2u * 3u);
  EXPECT_EQ(cells[0].bytes, 1 * M);
  EXPECT_EQ(cells[0].blocks, 0);
  EXPECT_FALSE(cells[0].method.tma);
  EXPECT_TRUE(cells[1].method.tma);
  EXPECT_EQ(cells[1].method.chunk_bytes, 8 * K);
  EXPECT_EQ(cells[2].method.chunk_bytes, 4 * K);
  EXPECT_EQ(cells[3].blocks, 33);
  EXPECT_FALSE(cells[3].method.tma);
  EXPECT_EQ(cells[6].bytes, 64 * M);
  EXPECT_EQ(PeerStoreGrid(cells[0], 132), 264);
  EXPECT_EQ(PeerStoreGrid(cells[3], 132), 33);
}

TEST(KernelCostPeerStoreTest, TmaCellsAreComparedWithTheSmCellOfTheirSizeAndGrid) {
  const PeerStoreCell sm{64 * M, {false, 0}, 0};
  const PeerStoreCell tma{64 * M, {true, 16 * K}, 0};
  const PeerStoreCell other_grid{64 * M, {true, 16 * K}, 33};
  std::vector<PeerStoreResult> r = {
      SummarizePeerStore(sm, 1, 4, {40.0, 50.0, 60.0}),
      SummarizePeerStore(tma, 1, 4, {50.0, 45.0}),
      SummarizePeerStore(other_grid, 1, 4, {80.0}),
  };
  EXPECT_DOUBLE_EQ(r[0].best_us, 40.0);
  EXPECT_DOUBLE_EQ(r[0].median_us, 50.0);
  EXPECT_NEAR(r[0].gbps, 64.0 * M / 40.0 / 1e3, 1e-9);
  ComparePeerStoreToSm(r);
  EXPECT_DOUBLE_EQ(r[0].vs_sm, 1.0);
  EXPECT_NEAR(r[1].vs_sm, 40.0 / 45.0, 1e-12);
  EXPECT_EQ(r[2].vs_sm, 0);  // no SM cell at 33 blocks
  // Destinations multiply the bytes.
  EXPECT_NEAR(SummarizePeerStore(sm, 3, 4, {40.0}).gbps, 3 * 64.0 * M / 40.0 / 1e3, 1e-9);
  // A failed SM cell compares nothing.
  r[0].error = "launch failed";
  ComparePeerStoreToSm(r);
  EXPECT_EQ(r[1].vs_sm, 0);
}

TEST(KernelCostPeerStoreTest, OutputsSayOneGpuIsNotTheLink) {
  ASSERT_OK_AND_ASSIGN(
      CostOptions o, ParseCostArgs({"--peer-store", "--sizes", "1M", "--peer-tma-chunks", "16K"}));
  CostRun run;
  run.options = o;
  run.gpu = "NVIDIA H200, GPU 0 at 0000:19:00.0";
  run.multiprocessors = 132;
  run.command_line = "qr-kernel-cost --peer-store";
  const std::string banner = PeerStoreBanner(run);
  EXPECT_THAT(banner, HasSubstr("NOT NVLink"));
  EXPECT_THAT(banner, HasSubstr("qr-bench --peer-tma-chunks"));
  EXPECT_THAT(banner, HasSubstr("2 x 132 multiprocessors"));
  std::vector<PeerStoreResult> r = {
      SummarizePeerStore({1 * M, {false, 0}, 0}, 1, 50, {10.0, 12.0}),
      SummarizePeerStore({1 * M, {true, 16 * K}, 0}, 1, 50, {8.0}),
  };
  ComparePeerStoreToSm(r);
  PeerStoreResult failed = SummarizePeerStore({1 * M, {true, 4 * K}, 0}, 1, 50, {});
  failed.error = "chunk_bytes, bad";
  r.push_back(failed);
  EXPECT_THAT(PeerStoreTableHeader(), HasSubstr("vs sm"));
  EXPECT_THAT(PeerStoreTableLine(run, r[0]), HasSubstr("sm"));
  EXPECT_THAT(PeerStoreTableLine(run, r[1]), HasSubstr("tma 16K"));
  EXPECT_THAT(PeerStoreTableLine(run, r[1]), HasSubstr("1.250"));
  EXPECT_THAT(PeerStoreTableLine(run, r[1]), HasSubstr("264"));
  EXPECT_THAT(PeerStoreTableLine(run, r[2]), HasSubstr("FAILED: chunk_bytes, bad"));
  const std::string header = PeerStoreCsvHeader();
  const auto commas = [](const std::string& line) {
    return std::count(line.begin(), line.end(), ',');
  };
  for (const PeerStoreResult& x : r) EXPECT_EQ(commas(PeerStoreCsvLine(run, x)), commas(header));
  EXPECT_EQ(PeerStoreCsvLine(run, r[1]),
            "peer-store,1048576,1,tma,16384,264,50,1,8.000,8.000,131.07,1.2500,\n");
  EXPECT_THAT(PeerStoreCsvLine(run, r[2]), HasSubstr(",chunk_bytes; bad\n"));
  const auto j = nlohmann::json::parse(PeerStoreJson(run, r));
  EXPECT_THAT(j["run"]["what"].get<std::string>(), HasSubstr("not NVLink"));
  EXPECT_EQ(j["run"]["multiprocessors"], 132);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][1]["method"], "tma");
  EXPECT_EQ(j["results"][1]["tma_chunk_bytes"], 16 * K);
  EXPECT_EQ(j["results"][1]["blocks"], 264);
  EXPECT_DOUBLE_EQ(j["results"][1]["vs_sm"].get<double>(), 1.25);
  EXPECT_EQ(j["results"][2]["error"], "chunk_bytes, bad");
  EXPECT_FALSE(j["results"][2].contains("best_us"));
}

}  // namespace
}  // namespace qr::cost
