// The GPU kernels' addressing of reduce-scatter / all-gather chunks
// (CollectiveAtomOffsetInChunk, what kernels/gpu/collective_kernels.cuh's
// ChunkTiles computes) against the layout the references use
// (CollectiveMessageIndex): every value of a tile's shard is in exactly one
// thread's atom, at the reference's index, and an atom never straddles a
// block of 32 values (so the codecs' blocks are the reference's).
#include "kernels/collective_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/codec_layout.h"
#include "kernels/geometry.h"

namespace qr::kernels {
namespace {

TEST(CollectiveLayoutTest, GpuAtomsCoverEveryShardValueAtTheReferencesIndex) {
  for (int ws : {2, 4, 8}) {
    const int64_t shard_elems = ShardElems(ws);
    const int rows = static_cast<int>(shard_elems / kAtomRowElems);
    ASSERT_EQ(int64_t{rows} * kAtomRowElems, shard_elems) << ws;
    // A count that ends mid-shard and mid-block, over three tiles.
    const int64_t count = 2 * shard_elems + 1000;
    for (int64_t tile = 0; tile < CollectiveTiles(count, ws); ++tile) {
      for (int shard = 0; shard < ws; ++shard) {
        std::vector<int> seen(static_cast<size_t>(shard_elems), 0);
        for (int row = 0; row < rows; ++row) {
          for (int thread = 0; thread < kAtomRowAtoms; ++thread) {
            const int64_t off = CollectiveAtomOffsetInChunk(tile, row, thread, ws);
            ASSERT_EQ(off % kAtomBytes, 0);
            const int64_t first = off / 2;  // value index in the chunk
            // The atom's values, from the shard's start.
            const int64_t in_shard = first - CollectiveChunkOffset(tile, ws);
            ASSERT_GE(in_shard, 0);
            ASSERT_LE(in_shard + kAtomElems, shard_elems);
            ASSERT_EQ(in_shard / kBlockElems, (in_shard + kAtomElems - 1) / kBlockElems);
            for (int j = 0; j < kAtomElems; ++j) {
              ++seen[static_cast<size_t>(in_shard + j)];
              ASSERT_EQ(shard * count + first + j,
                        CollectiveMessageIndex(count, tile, shard, in_shard + j, ws))
                  << "ws " << ws << " tile " << tile << " shard " << shard << " row " << row
                  << " thread " << thread;
            }
          }
        }
        for (int64_t i = 0; i < shard_elems; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << i;
      }
    }
  }
}

// The kernels test `offset < count * 2` for "in the chunk": exactly the
// values the references read and write (below count), whole atoms since
// count is a multiple of 8.
TEST(CollectiveLayoutTest, AtomsInTheChunkAreExactlyTheValuesBelowCount) {
  for (int ws : {2, 4, 8}) {
    const int64_t count = ShardElems(ws) + 24;
    const int64_t last = CollectiveTiles(count, ws) - 1;
    int64_t in_chunk = 0;
    for (int row = 0; row < ShardElems(ws) / kAtomRowElems; ++row) {
      for (int thread = 0; thread < kAtomRowAtoms; ++thread) {
        if (CollectiveAtomOffsetInChunk(last, row, thread, ws) < count * 2) in_chunk += kAtomElems;
      }
    }
    EXPECT_EQ(in_chunk, count - CollectiveChunkOffset(last, ws)) << ws;
  }
}

}  // namespace
}  // namespace qr::kernels
