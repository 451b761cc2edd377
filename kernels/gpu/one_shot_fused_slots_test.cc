// The fused one-shot kernel's slot map (one_shot_fused_slots.h): every local
// row of every block lands on a distinct slot row of one of the block's own
// areas (so no two blocks of a call, and no two atoms of a block, share a
// slot, and each slot row keeps the area the plain one-shot kernel gives
// it); a block's areas fill in order (the kernel advances the counts of the
// first FusedBlockMap::Row(need - 1).area_index + 1 areas); the whole region is
// used; and FusedOneShotSlots accepts exactly the calls whose rows fit.
#include "kernels/gpu/one_shot_fused_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/geometry.h"
#include "kernels/gpu/max_blocks_shared.h"

namespace qr::kernels {
namespace {

void CheckMap(const FusedSlots& s) {
  SCOPED_TRACE("R=" + std::to_string(s.rows) + " S=" + std::to_string(s.stride) +
               " G=" + std::to_string(s.grid));
  std::vector<int> owner(s.rows, -1);
  int64_t total = 0;
  for (int b = 0; b < s.grid; ++b) {
    int last_area = 0;
    int64_t rows = 0;
    for (int m = 0; m < FusedBlockAreas(s, b); ++m) rows += FusedAreaRows(s, b + m * s.grid);
    ASSERT_EQ(FusedBlockRows(s, b), rows) << "block " << b;
    for (int64_t q = 0; q < FusedBlockRows(s, b); ++q) {
      const FusedSlotRow r = FusedBlockMap(s, b).Row(static_cast<int>(q));
      ASSERT_GE(r.row, 0);
      ASSERT_LT(r.row, s.rows);
      ASSERT_LT(r.area_index, FusedBlockAreas(s, b));
      const int area = b + r.area_index * s.grid;
      ASSERT_EQ(r.row % s.stride, area) << "the plain kernel's area of the row";
      ASSERT_GE(r.area_index, last_area) << "areas fill in order";
      last_area = r.area_index;
      ASSERT_EQ(owner[r.row], -1) << "row " << r.row << " used twice";
      owner[r.row] = b;
      ++total;
    }
  }
  EXPECT_EQ(total, s.rows) << "every slot row belongs to one block";
}

TEST(FusedSlotsTest, MapIsABijectionOntoEachBlocksAreas) {
  for (int rows : {1, 7, 33, 128, 256, 512, 1024}) {
    for (int stride : {1, 2, 5, 33, 128, 256, 264, 528}) {
      if (stride > rows) continue;
      for (int grid : {1, 2, 3, 7, 32, 33, 256}) {
        if (grid > stride) continue;
        CheckMap(FusedSlots{rows, stride, grid});
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The fit rule against a direct count: block b's token rows (those of its
// row group b / parts), times its atoms of a row, within the slot rows of
// its areas; and, with several parts, a lane inbox for each token row and
// part (count_inboxes).
bool FitsByCount(int64_t tokens, int64_t hidden, int max_blocks, int ws, int max_grid, int parts,
                 bool count_inboxes = true) {
  if (count_inboxes && parts > 1 && tokens * parts > OneShotMaxBytes(2) / 4096) return false;
  const int rows = static_cast<int>(OneShotMaxBytes(ws) / 4096);
  const int stride = std::min(rows, max_blocks);
  const int grid = static_cast<int>(std::min<int64_t>(std::min(stride, max_grid), tokens * parts)) /
                   parts * parts;
  if (grid == 0 || tokens * hidden * 2 > OneShotMaxBytes(ws)) return false;
  const int groups = grid / parts;
  for (int b = 0; b < grid; ++b) {
    int64_t mine = 0;
    for (int64_t t = b / parts; t < tokens; t += groups) ++mine;
    int64_t slot_rows = 0;
    for (int a = b; a < stride; a += grid) {
      for (int r = a; r < rows; r += stride) ++slot_rows;
    }
    if ((mine * hidden / 8 / parts + 255) / 256 > slot_rows) return false;
  }
  return true;
}

TEST(FusedSlotsTest, AcceptsExactlyTheCallsThatFit) {
  int fits = 0;
  int misses = 0;
  for (int ws : {2, 4, 8}) {
    for (int max_blocks : {16, 33, 66, 132, 528, 608}) {
      for (int64_t tokens : {1, 2, 3, 8, 31, 64, 100, 128, 255, 256, 257, 1000}) {
        for (int64_t hidden : {8, 1032, 2048, 4096, 5120, 8192, 16384}) {
          for (int parts : {1, 2, 4, 8}) {
            const int threads = FusedThreads(hidden, parts);
            if (threads == 0) continue;
            const int max_grid = FusedMaxGrid(max_blocks, threads);
            const FusedSlots s =
                FusedOneShotSlots(tokens, hidden, max_blocks, ws, 608, max_grid, parts);
            const bool want = FitsByCount(tokens, hidden, max_blocks, ws, max_grid, parts);
            ASSERT_EQ(s.grid > 0, want) << "ws " << ws << " max_blocks " << max_blocks << " "
                                        << tokens << "x" << hidden << " parts " << parts;
            if (want) {
              ++fits;
              EXPECT_EQ(s.grid % parts, 0);
              EXPECT_EQ(s.parts, parts);
              EXPECT_EQ(s.grid, std::min<int64_t>(std::min(s.stride, max_grid), tokens * parts) /
                                    parts * parts);
              EXPECT_EQ(s.rows, OneShotMaxBytes(ws) / 4096);
            } else {
              ++misses;
            }
          }
        }
      }
    }
  }
  // Both answers occur (the rule is not trivially true or false).
  EXPECT_GT(fits, 100);
  EXPECT_GT(misses, 10);
}

// Decode shapes (tokens 1 .. 256 x hidden 4096 / 8192) below the one-shot
// maximum run as one launch.
TEST(FusedSlotsTest, ServingShapesFitOnAnH200) {
  // 132 multiprocessors x 4 blocks: the layout of an H200 (one GPU per rank),
  // and the grid cap of eight ranks sharing one (kernels/gpu/max_blocks_shared.h).
  for (int max_blocks : {528, 33}) {
    for (int ws : {2, 4, 8}) {
      for (int64_t hidden : {4096, 8192}) {
        for (int64_t tokens = 1; tokens <= 256; tokens *= 2) {
          // A message of the whole region fits only if every block's share
          // matches its areas exactly; those take the two launches.
          if (tokens * hidden * 2 >= OneShotMaxBytes(ws)) continue;
          EXPECT_GT(FusedShapeOf(tokens, hidden, max_blocks, ws, 608).slots.grid, 0)
              << "ws " << ws << " max_blocks " << max_blocks << " " << tokens << "x" << hidden;
        }
      }
    }
  }
}

// Rows split in parts need a lane inbox per token row and part: a call with
// more than the layout holds is refused (4 parts of 6144 values, 341 rows:
// 1364 inboxes of 1024), whatever its grid; one part needs none.
TEST(FusedSlotsTest, RefusesMoreRowPartsThanLaneInboxes) {
  EXPECT_EQ(kFusedLaneInboxes, 1024);
  // 300 rows of 6144 values in 4 parts on 256 blocks: the slots hold them,
  // the 1200 inboxes do not.
  EXPECT_TRUE(FitsByCount(300, 6144, 512, 2, 256, 4, /*count_inboxes=*/false));
  EXPECT_EQ(FusedOneShotSlots(300, 6144, 512, 2, 608, 256, 4).grid, 0);
  // The shape never asks for more: past the inboxes it takes the fewest parts.
  for (int max_blocks : {256, 512, 608, 4096}) {
    for (int64_t tokens : {1, 100, 200, 256, 300, 341}) {
      const FusedLaunchShape shape = FusedShapeOf(tokens, 6144, max_blocks, 2, 4096);
      if (shape.parts > 1) {
        EXPECT_LE(tokens * shape.parts, kFusedLaneInboxes) << tokens;
      }
    }
  }
}

TEST(FusedSlotsTest, RefusesMalformedCallsAndTooManyAreas) {
  EXPECT_EQ(FusedOneShotSlots(0, 4096, 528, 2, 608, 132).grid, 0);
  EXPECT_EQ(FusedOneShotSlots(1, 12, 528, 2, 608, 132).grid, 0);
  EXPECT_EQ(FusedOneShotSlots(1, 4096, 0, 2, 608, 132).grid, 0);
  EXPECT_EQ(FusedOneShotSlots(1, OneShotMaxElems(2) + 8, 528, 2, 608, 132).grid, 0);
  // One token: one block holds every area, more than the kernel keeps.
  EXPECT_GT(FusedOneShotSlots(1, 4096, 528, 2, 608, 132).grid, 0);
  EXPECT_EQ(FusedOneShotSlots(1, 4096, 528, 2, 527, 132).grid, 0);
  EXPECT_EQ(FusedOneShotSlots(1, 4096, 528, 2, 608, 0).grid, 0);
}

// The grid never passes max_grid: more token rows go to each block instead.
TEST(FusedSlotsTest, GridStopsAtTheCap) {
  EXPECT_EQ(FusedOneShotSlots(256, 4096, 528, 2, 608, 132).grid, 132);
  EXPECT_EQ(FusedOneShotSlots(256, 4096, 528, 2, 608, 8).grid, 8);
  EXPECT_EQ(FusedOneShotSlots(5, 4096, 528, 2, 608, 8).grid, 5);
}

// Every rank's fused blocks stay resident at once: at 64 registers a thread
// a multiprocessor holds 1024 threads of them, and the grid never asks for
// more threads than max_blocks' 256-thread blocks have (an H200, 132
// multiprocessors, with one GPU per rank, and 2, 4 or 8 ranks sharing it).
TEST(FusedSlotsTest, EveryRanksBlocksStayResident) {
  const int sms = 132;
  for (int threads : {256, 512, 768, 1024}) {
    EXPECT_LE(FusedMaxGrid(sms * 4, threads) * threads, sms * 1024) << threads;
    EXPECT_GE(FusedMaxGrid(sms * 4, threads), sms) << threads;
    for (int ranks : {2, 4, 8}) {
      const int shared = SharedGpuMaxBlocks(sms * 4, ranks);
      EXPECT_LE(FusedMaxGrid(shared, threads) * threads * ranks, sms * 1024)
          << ranks << " ranks, " << threads << " threads";
      EXPECT_GE(FusedMaxGrid(shared, threads), 1);
    }
  }
}

// The block map's rows against a direct walk of the block's areas (area
// after area, long areas first).
TEST(FusedSlotsTest, BlockMapMatchesAreaAfterArea) {
  for (const FusedSlots s : {FusedSlots{1024, 132, 33}, FusedSlots{1024, 528, 132},
                             FusedSlots{100, 7, 3}, FusedSlots{33, 33, 33}}) {
    for (int b = 0; b < s.grid; ++b) {
      const FusedBlockMap map(s, b);
      int64_t q = 0;
      for (int m = 0; m < FusedBlockAreas(s, b); ++m) {
        const int area = b + m * s.grid;
        for (int k = 0; k < FusedAreaRows(s, area); ++k, ++q) {
          const FusedSlotRow r = map.Row(static_cast<int>(q));
          ASSERT_EQ(r.area_index, m) << "block " << b << " q " << q;
          ASSERT_EQ(r.row, area + k * s.stride) << "block " << b << " q " << q;
        }
      }
      ASSERT_EQ(q, FusedBlockRows(s, b));
    }
  }
}

// The launch's constants give every block the map and token rows the
// divisions give (the kernel builds its map from them).
TEST(FusedSlotsTest, LaunchConstantsGiveTheBlocksMapAndRows) {
  for (int ws : {2, 4, 8}) {
    for (int max_blocks : {33, 64, 132, 528}) {
      for (int64_t tokens : {1, 3, 8, 40, 64, 129, 256}) {
        for (int parts : {1, 2, 4}) {
          const FusedSlots s = FusedOneShotSlots(tokens, 4096, max_blocks, ws, 4096,
                                                 FusedMaxGrid(max_blocks, 256), parts);
          if (s.grid == 0) continue;
          const FusedLaunchConsts c = FusedLaunchConstsOf(s, tokens);
          for (int b = 0; b < s.grid; ++b) {
            const FusedBlockMap want(s, b);
            const FusedBlockMap got(s, c, b);
            ASSERT_EQ(got.most, want.most);
            ASSERT_EQ(got.long_areas, want.long_areas) << "block " << b;
            ASSERT_EQ(got.long_rows, want.long_rows);
            ASSERT_EQ(FusedGroupTokens(c, b / parts), FusedBlockTokens(tokens, s, b))
                << "block " << b << " of " << s.grid << ", tokens " << tokens;
          }
        }
      }
    }
  }
}

// One part: a thread per 16-byte chunk of a row, in whole sets of 256
// lanes, 256 to 1024 threads. Several parts: rows of whole lane sets,
// hidden / 8 / parts threads, at most 1024.
TEST(FusedSlotsTest, BlockThreadsFollowTheRowAndItsParts) {
  // {hidden, parts, threads}; 2056 in two parts is not whole lane sets, and
  // parts are 1, 2, 4 or 8.
  const int64_t cases[][3] = {{8, 1, 256},    {2048, 1, 256},  {2056, 1, 512},   {4096, 1, 512},
                              {5120, 1, 768}, {8192, 1, 1024}, {16384, 1, 0},    {4096, 2, 256},
                              {8192, 2, 512}, {8192, 4, 256},  {16384, 2, 1024}, {16384, 8, 256},
                              {6144, 4, 192}, {2056, 2, 0},    {4096, 3, 0},     {65536, 8, 1024},
                              {131072, 8, 0}};
  for (const auto& c : cases) {
    EXPECT_EQ(FusedThreads(c[0], static_cast<int>(c[1])), c[2]) << c[0] << " in " << c[1];
  }
}

// The lane-threads form: two chunks a thread, 256 threads up to 4096
// values, 512 up to 8192; rows of one lane set or less, or above 8192
// values, are not its.
TEST(FusedSlotsTest, LaneThreadsTakeTwoChunksAThread) {
  // {hidden, threads}; 8200 would need 768 threads, above kFusedLaneMaxThreads.
  const int64_t cases[][2] = {{8, 0},      {2048, 0},   {2056, 256}, {4096, 256}, {4104, 512},
                              {5120, 512}, {8192, 512}, {8200, 0},   {16384, 0}};
  for (const auto& c : cases) EXPECT_EQ(FusedLaneThreads(c[0]), c[1]) << "hidden " << c[0];
}

// Forced forms: the lane-threads form runs whole rows on one block, one
// token row a block up to the grid cap (FusedMaxGrid of its threads), and
// its slots are the one-part slots; where it does not take the row, the
// shape has no grid.
TEST(FusedSlotsTest, ShapeOfAForcedForm) {
  const auto lanes = FusedRowForm::kLaneThreads;
  FusedLaunchShape s = FusedShapeOf(1, 4096, 528, 2, 608, lanes);
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(s.threads, 256);
  EXPECT_EQ(s.chunks_per_thread, 2);
  EXPECT_EQ(s.slots.grid, 1);
  s = FusedShapeOf(64, 8192, 132, 2, 608, lanes);
  EXPECT_EQ(s.threads, 512);
  EXPECT_EQ(s.chunks_per_thread, 2);
  EXPECT_EQ(s.slots.grid, 64);
  const FusedSlots one_part = FusedOneShotSlots(64, 8192, 132, 2, 608, 66, 1);
  EXPECT_EQ(s.slots.rows, one_part.rows);
  EXPECT_EQ(s.slots.stride, one_part.stride);
  EXPECT_EQ(s.slots.grid, one_part.grid);
  s = FusedShapeOf(256, 4096, 132, 2, 608, lanes);  // two rows a block
  EXPECT_EQ(s.slots.grid, 132);
  EXPECT_EQ(FusedShapeOf(128, 8192, 132, 2, 608, lanes).slots.grid, 66);
  EXPECT_EQ(FusedShapeOf(1, 2048, 528, 2, 608, lanes).slots.grid, 0);
  EXPECT_EQ(FusedShapeOf(1, 16384, 528, 2, 608, lanes).slots.grid, 0);
  // The one-thread-a-chunk form keeps its own shapes.
  s = FusedShapeOf(64, 8192, 132, 2, 608, FusedRowForm::kChunkThreads);
  EXPECT_EQ(s.chunks_per_thread, 1);
  EXPECT_EQ(s.threads, 1024);
  EXPECT_EQ(s.slots.grid, 33);
}

// The shortest rows' split: one block up to 512 threads, else blocks of at
// most 256 threads; the fewest parts otherwise.
TEST(FusedSlotsTest, RowPartsKeepBlocksSmall) {
  EXPECT_EQ(FusedRowParts(8), 1);
  EXPECT_EQ(FusedRowParts(2048), 1);
  EXPECT_EQ(FusedRowParts(2056), 1);
  EXPECT_EQ(FusedRowParts(4096), 1);
  EXPECT_EQ(FusedRowParts(5120), 0);  // 768 threads, not whole lane sets
  EXPECT_EQ(FusedRowParts(6144), 4);
  EXPECT_EQ(FusedRowParts(8192), 4);
  EXPECT_EQ(FusedRowParts(16384), 8);
  EXPECT_EQ(FusedRowParts(32768), 0);
  EXPECT_EQ(FusedFewestParts(2056), 1);
  EXPECT_EQ(FusedFewestParts(8192), 1);
  EXPECT_EQ(FusedFewestParts(16384), 2);
  EXPECT_EQ(FusedFewestParts(32768), 4);
  EXPECT_EQ(FusedFewestParts(131072), 0);
}

// Where a row's parts run as a cluster, rows of 4096 values split into four
// parts of 128 threads, or two of 256, while the grid takes at most half
// the layout's blocks; other rows, and longer calls, as without clusters.
TEST(FusedSlotsTest, ClusterPartsSplitRowsOf4096ForShortCalls) {
  EXPECT_EQ(FusedClusterParts(1, 2048, 132), 0);  // one block of 256 threads
  EXPECT_EQ(FusedClusterParts(1, 2056, 132), 0);  // 257 chunks: not whole lane sets
  EXPECT_EQ(FusedClusterParts(1, 4096, 132), 4);
  EXPECT_EQ(FusedClusterParts(16, 4096, 132), 4);
  EXPECT_EQ(FusedClusterParts(17, 4096, 132), 2);
  EXPECT_EQ(FusedClusterParts(33, 4096, 132), 2);
  EXPECT_EQ(FusedClusterParts(34, 4096, 132), 0);
  EXPECT_EQ(FusedClusterParts(1, 4096, 3), 0);
  EXPECT_EQ(FusedClusterParts(1, 6144, 132), 0);
  EXPECT_EQ(FusedClusterParts(1, 8192, 132), 0);
  auto shape_of = [](int64_t tokens, int64_t hidden, int max_blocks) {
    return FusedShapeOf(tokens, hidden, max_blocks, 2, 608, FusedRowForm::kPolicy, true);
  };
  FusedLaunchShape s = shape_of(1, 4096, 132);
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(s.threads, 128);
  EXPECT_EQ(s.slots.grid, 4);
  s = shape_of(16, 4096, 132);  // 64 blocks of the 132
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(s.slots.grid, 64);
  EXPECT_TRUE(FusedOneLaunchPays(s, 16));
  s = shape_of(17, 4096, 132);  // 68 > 66: two parts of 256 threads
  EXPECT_EQ(s.parts, 2);
  EXPECT_EQ(s.threads, 256);
  EXPECT_EQ(s.slots.grid, 34);
  s = shape_of(34, 4096, 132);  // 68 > 66: one block of 512 threads a row
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(s.threads, 512);
  EXPECT_EQ(s.slots.grid, 34);
  s = shape_of(66, 4096, 528);  // a GPU per rank: 264 blocks of the 528
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(s.slots.grid, 264);
  s = shape_of(1, 4096, 33);  // eight ranks sharing a GPU
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(shape_of(8, 4096, 33).parts, 2);
  EXPECT_EQ(shape_of(9, 4096, 33).parts, 1);
  // As without clusters: rows of 8192 (four parts of 256, now one cluster)
  // and walked rows.
  for (int64_t tokens : {1, 33, 67, 256}) {
    for (int64_t hidden : {8192, 4096}) {
      if (hidden == 4096 && tokens <= 33) continue;
      const FusedLaunchShape a = shape_of(tokens, hidden, 132);
      const FusedLaunchShape b = FusedShapeOf(tokens, hidden, 132, 2, 608);
      EXPECT_EQ(a.parts, b.parts) << tokens << " x " << hidden;
      EXPECT_EQ(a.threads, b.threads) << tokens << " x " << hidden;
      EXPECT_EQ(a.slots.grid, b.slots.grid) << tokens << " x " << hidden;
    }
  }
}

// The policy: at most two rows a block of 512 threads or fewer, one of 1024.
TEST(FusedSlotsTest, OneLaunchPaysForFewRowsABlock) {
  EXPECT_TRUE(FusedOneLaunchPays(FusedShapeOf(64, 4096, 132, 2, 608), 64));     // 1 row, 256
  EXPECT_TRUE(FusedOneLaunchPays(FusedShapeOf(256, 4096, 132, 2, 608), 256));   // 2 rows, 256
  EXPECT_TRUE(FusedOneLaunchPays(FusedShapeOf(128, 8192, 132, 2, 608), 128));   // 2 rows, 512
  EXPECT_TRUE(FusedOneLaunchPays(FusedShapeOf(8, 16384, 132, 2, 608), 8));      // 8 parts
  EXPECT_FALSE(FusedOneLaunchPays(FusedShapeOf(64, 16384, 132, 2, 608), 64));   // 4 rows, 1024
  EXPECT_FALSE(FusedOneLaunchPays(FusedShapeOf(256, 8192, 132, 2, 608), 256));  // no fit
  const auto chunk = FusedRowForm::kChunkThreads;
  EXPECT_FALSE(FusedOneLaunchPays(FusedShapeOf(256, 4096, 132, 2, 608, chunk), 256));  // 4 rows
  EXPECT_FALSE(FusedOneLaunchPays(FusedShapeOf(64, 8192, 132, 2, 608, chunk), 64));    // 2 of 1024
}

// The policy's form: one thread a chunk while every block has one token row
// (whole or in parts), and for rows the lane-threads form does not take
// (2048 values or less, above 8192); the lane-threads form otherwise.
TEST(FusedSlotsTest, PolicyPicksTheFormByRowsAndLength) {
  auto form_of = [](int64_t tokens, int64_t hidden) {
    const FusedLaunchShape s = FusedShapeOf(tokens, hidden, 132, 2, 608);
    return s.chunks_per_thread == 1 ? FusedRowForm::kChunkThreads : FusedRowForm::kLaneThreads;
  };
  const auto chunk = FusedRowForm::kChunkThreads;
  const auto lanes = FusedRowForm::kLaneThreads;
  EXPECT_EQ(form_of(1, 4096), chunk);
  EXPECT_EQ(form_of(66, 4096), chunk);  // 66 blocks of 512 threads: the cap
  EXPECT_EQ(form_of(67, 4096), lanes);
  EXPECT_EQ(form_of(256, 4096), lanes);
  EXPECT_EQ(form_of(1, 8192), chunk);  // four parts
  EXPECT_EQ(FusedShapeOf(1, 8192, 132, 2, 608).parts, 4);
  EXPECT_EQ(form_of(2, 8192), chunk);   // eight blocks of 256 threads
  EXPECT_EQ(form_of(33, 8192), chunk);  // 132 blocks: the cap
  EXPECT_EQ(form_of(34, 8192), lanes);
  EXPECT_EQ(form_of(128, 8192), lanes);
  EXPECT_EQ(form_of(1, 2048), chunk);
  EXPECT_EQ(form_of(64, 2048), chunk);
  EXPECT_EQ(form_of(1, 16384), chunk);
  EXPECT_EQ(form_of(40, 16384), chunk);
}

// At every world size the policy splits rows of 8192 values into parts for
// any number of token rows while every row group keeps one row, and walks
// longer calls' rows with the lane-threads form.
TEST(FusedSlotsTest, PolicySplitsRowsWhileEveryGroupHasOneRow) {
  auto shape_of = [](int64_t tokens, int ws) { return FusedShapeOf(tokens, 8192, 132, ws, 608); };
  for (int ws : {2, 4, 8}) {
    for (int64_t tokens : {1, 2, 8, 33}) {  // 33 rows x 4 parts = 132 blocks
      const FusedLaunchShape s = shape_of(tokens, ws);
      EXPECT_EQ(s.chunks_per_thread, 1) << ws << " " << tokens;
      EXPECT_EQ(s.parts, 4) << ws << " " << tokens;
      EXPECT_EQ(s.slots.grid, tokens * 4) << ws << " " << tokens;
    }
    // 34 rows would need 136 blocks: rows are walked, by the lane form.
    EXPECT_EQ(shape_of(34, ws).chunks_per_thread, kFusedLaneChunks) << ws;
  }
  // Rows of one part keep the one-part form at every world size.
  EXPECT_EQ(FusedShapeOf(2, 4096, 132, 8, 608).parts, 1);
  EXPECT_EQ(FusedShapeOf(2, 4096, 132, 8, 608).chunks_per_thread, 1);
}

// The one-thread-a-chunk form splits a row while every row group then has
// one row, else takes the fewest parts; the grid is whole row groups.
TEST(FusedSlotsTest, ChunkFormSplitsShortCallsOnly) {
  const auto chunk = FusedRowForm::kChunkThreads;
  FusedLaunchShape s = FusedShapeOf(1, 8192, 528, 2, 608, chunk);
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(s.threads, 256);
  EXPECT_EQ(s.slots.grid, 4);
  s = FusedShapeOf(16, 8192, 132, 2, 608, chunk);  // 64 blocks of the 132
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(s.slots.grid, 64);
  s = FusedShapeOf(64, 8192, 132, 2, 608, chunk);  // 256 blocks would not fit
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(s.threads, 1024);
  EXPECT_EQ(s.slots.grid, 33);
  s = FusedShapeOf(64, 4096, 132, 2, 608, chunk);  // rows of 4096: one block each
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(s.slots.grid, 64);
  s = FusedShapeOf(256, 4096, 132, 2, 608, chunk);  // 512 blocks would not fit
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(s.threads, 512);
  EXPECT_EQ(s.slots.grid, 66);
  s = FusedShapeOf(40, 16384, 132, 2, 608);  // 320 > 132: two parts of 1024 threads
  EXPECT_EQ(s.parts, 2);
  EXPECT_EQ(s.threads, 1024);
  EXPECT_EQ(s.slots.grid, 32);
  EXPECT_EQ(FusedShapeOf(1, 2056, 528, 2, 608, chunk).parts, 1);
  EXPECT_EQ(FusedShapeOf(1, 6144, 528, 2, 608, chunk).parts, 4);  // 192 threads
  EXPECT_EQ(FusedShapeOf(1, 131072, 528, 2, 608).slots.grid, 0);
  EXPECT_EQ(FusedShapeOf(1, 12, 528, 2, 608).slots.grid, 0);
}

}  // namespace
}  // namespace qr::kernels
