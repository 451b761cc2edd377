#include "kernels/reduce_scatter_reference.h"

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/collective_error_bound.h"
#include "kernels/error_bound.h"
#include "kernels/float16.h"
#include "kernels/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;

enum class Mode { kFp16, kBf16, kBf16Cast };

TwoShotParams MakeParams(int ws, Codec codec, Mode mode, int64_t n) {
  TwoShotParams p;
  p.world_size = ws;
  p.codec = codec;
  p.dtype = mode == Mode::kFp16 ? DType::kFloat16 : DType::kBFloat16;
  p.cast_bf16_to_fp16 = mode == Mode::kBf16Cast;
  p.num_elems = n;
  return p;
}

using Inputs = std::vector<std::vector<uint16_t>>;

// Every rank's world_size * n inputs, random finite blocks (bf16 kept small
// enough that fp32 sums cannot overflow: the bound's domain).
Inputs RandomInputs(const TwoShotParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double limit = p.dtype == DType::kFloat16 ? 0 : 1e37;
  const int64_t total = p.world_size * p.num_elems;
  Inputs in(p.world_size);
  for (auto& v : in) {
    v.resize((total + 31) / 32 * 32);
    testing::FillRandomBlocks(p.dtype, rng, limit, v.data(), v.size());
    v.resize(total);
  }
  return in;
}

constexpr uint16_t kSentinel = 0x5A5A;
constexpr int kGuard = 8;

Inputs RunScatter(const TwoShotParams& p, const Inputs& in) {
  Inputs out(p.world_size, std::vector<uint16_t>(p.num_elems + kGuard, kSentinel));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < p.world_size; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  EXPECT_OK(ReferenceReduceScatter(p, ins.data(), outs.data()));
  for (auto& o : out) {
    for (int g = 0; g < kGuard; ++g) EXPECT_EQ(o[p.num_elems + g], kSentinel) << "wrote past n";
    o.resize(p.num_elems);
  }
  return out;
}

// The sizes: a few 16-byte units (odd multiples of 16 bytes), a shard, a
// shard plus an odd unit, a tile's worth per rank, several tiles ending inside
// a block.
std::vector<int64_t> Sizes(int ws) {
  return {8, 24, 40, ShardElems(ws), ShardElems(ws) + 8, 3 * ShardElems(ws) - 24, kTileElems + 56};
}

using Combo = std::tuple<int, Codec, Mode>;
std::vector<Combo> AllCombos() {
  std::vector<Combo> combos;
  for (int ws : {2, 4, 8}) {
    for (Codec c : kAllCodecs) {
      if (!CodecRunsAtWorldSize(c, ws)) continue;
      for (Mode m : {Mode::kFp16, Mode::kBf16, Mode::kBf16Cast}) combos.emplace_back(ws, c, m);
    }
  }
  return combos;
}
std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  const Mode m = std::get<2>(info.param);
  return "ws" + std::to_string(std::get<0>(info.param)) + "_" + CodecName(std::get<1>(info.param)) +
         (m == Mode::kFp16   ? "_fp16"
          : m == Mode::kBf16 ? "_bf16"
                             : "_bf16cast");
}

class ReduceScatterTest : public ::testing::TestWithParam<Combo> {};

// The specification: rank s's output is the two-shot's phase-1 reduced shard
// of the permuted message kernels/collective_layout.h defines, built here
// independently and run through the two-shot's own EncodeInputShard and
// ReduceShard (with the cast back to bf16 when casting).
TEST_P(ReduceScatterTest, IsTheTwoShotPhaseOneOfThePermutedMessage) {
  const auto [ws, codec, mode] = GetParam();
  for (int64_t n : Sizes(ws)) {
    const TwoShotParams p = MakeParams(ws, codec, mode, n);
    const Inputs in = RandomInputs(p, 31 + n);
    const Inputs out = RunScatter(p, in);
    const int64_t tiles = (n + ShardElems(ws) - 1) / ShardElems(ws);
    TwoShotParams m = p;
    m.num_elems = tiles * kTileElems;
    Inputs permuted(ws, std::vector<uint16_t>(m.num_elems, 0));
    for (int r = 0; r < ws; ++r) {
      for (int64_t t = 0; t < tiles; ++t) {
        for (int s = 0; s < ws; ++s) {
          for (int64_t i = 0; i < ShardElems(ws) && t * ShardElems(ws) + i < n; ++i) {
            permuted[r][t * kTileElems + s * ShardElems(ws) + i] =
                in[r][s * n + t * ShardElems(ws) + i];
          }
        }
      }
    }
    const int64_t wire_bytes = ShardWireBytes(codec, ws);
    std::vector<std::vector<uint8_t>> wire(ws, std::vector<uint8_t>(wire_bytes));
    std::vector<const uint8_t*> received;
    for (auto& w : wire) received.push_back(w.data());
    std::vector<uint16_t> reduced(ShardElems(ws));
    const bool cast = p.cast_bf16_to_fp16 && p.dtype == DType::kBFloat16;
    for (int64_t t = 0; t < tiles; ++t) {
      for (int s = 0; s < ws; ++s) {
        for (int r = 0; r < ws; ++r) EncodeInputShard(m, permuted[r].data(), t, s, wire[r].data());
        ReduceShard(m, received.data(), reduced.data());
        for (int64_t i = 0; i < ShardElems(ws) && t * ShardElems(ws) + i < n; ++i) {
          const uint16_t want = cast ? HalfToBFloat16(reduced[i]) : reduced[i];
          ASSERT_EQ(out[s][t * ShardElems(ws) + i], want)
              << "n=" << n << " rank " << s << " tile " << t << " value " << i;
        }
      }
    }
  }
}

TEST_P(ReduceScatterTest, WithinItsBoundAndTighterThanTheAllReduce) {
  const auto [ws, codec, mode] = GetParam();
  for (int64_t n : Sizes(ws)) {
    const TwoShotParams p = MakeParams(ws, codec, mode, n);
    const Inputs in = RandomInputs(p, 7 + n);
    const Inputs out = RunScatter(p, in);
    std::vector<const uint16_t*> ins;
    for (auto& v : in) ins.push_back(v.data());
    for (int r = 0; r < ws; ++r) {
      const BoundCheck c = CheckReduceScatterOutput(p, ins.data(), r, out[r].data());
      EXPECT_EQ(c.violations, 0) << "n=" << n << " rank " << r << " worst " << c.worst_index
                                 << " ratio " << c.max_ratio;
      EXPECT_EQ(c.skipped, 0);
    }
  }
  // The bound leaves out the all-reduce's second quantization: smaller.
  const double absmax[8] = {100, 100, 100, 100, 100, 100, 100, 100};
  const double elem[8] = {50, 50, 50, 50, 50, 50, 50, 50};
  const DType dtype = mode == Mode::kFp16 ? DType::kFloat16 : DType::kBFloat16;
  const bool cast = mode == Mode::kBf16Cast;
  const double rs = ReduceScatterErrorBound(codec, dtype, cast, ws, absmax, elem, 50.0 * ws);
  const double ar = TwoShotErrorBound(codec, dtype, cast, ws, absmax, elem, 50.0 * ws);
  EXPECT_GT(rs, 0.0);
  if (codec != Codec::kFp) {
    EXPECT_LT(rs, ar);
  }
}

TEST_P(ReduceScatterTest, InPlaceMatchesOutOfPlace) {
  const auto [ws, codec, mode] = GetParam();
  const TwoShotParams p = MakeParams(ws, codec, mode, 3 * ShardElems(ws) + 40);
  Inputs in = RandomInputs(p, 99);
  const Inputs want = RunScatter(p, in);
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < ws; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(in[r].data() + r * p.num_elems);
  }
  ASSERT_OK(ReferenceReduceScatter(p, ins.data(), outs.data()));
  for (int r = 0; r < ws; ++r) {
    EXPECT_EQ(std::memcmp(outs[r], want[r].data(), p.num_elems * 2), 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, ReduceScatterTest, ::testing::ValuesIn(AllCombos()), ComboName);

// With FP every element is the all-reduce's: the fp32 sum of the exact
// inputs in rank order, rounded once, whatever the layout.
TEST(ReduceScatterFpTest, EqualsTheAllReduceSlice) {
  for (int ws : {2, 4, 8}) {
    for (Mode mode : {Mode::kFp16, Mode::kBf16, Mode::kBf16Cast}) {
      for (int64_t n : Sizes(ws)) {
        const TwoShotParams p = MakeParams(ws, Codec::kFp, mode, n);
        const Inputs in = RandomInputs(p, 3 + n);
        const Inputs out = RunScatter(p, in);
        TwoShotParams whole = p;
        whole.num_elems = ws * n;
        Inputs reduced(ws, std::vector<uint16_t>(whole.num_elems));
        std::vector<const uint16_t*> ins;
        std::vector<uint16_t*> outs;
        for (int r = 0; r < ws; ++r) {
          ins.push_back(in[r].data());
          outs.push_back(reduced[r].data());
        }
        ASSERT_OK(ReferenceAllReduce(whole, ins.data(), outs.data()));
        for (int r = 0; r < ws; ++r) {
          ASSERT_EQ(std::memcmp(out[r].data(), reduced[0].data() + r * n, n * 2), 0)
              << "ws " << ws << " n " << n << " rank " << r;
        }
      }
    }
  }
}

// A one-shot call computes what FP without the cast computes.
TEST(ReduceScatterParamsTest, OneShotIsExact) {
  const TwoShotParams p = MakeParams(4, Codec::kInt4, Mode::kBf16Cast, 64);
  const TwoShotParams two = ReduceScatterParamsFor(p, Algorithm::kTwoShot);
  EXPECT_EQ(two.codec, Codec::kInt4);
  EXPECT_TRUE(two.cast_bf16_to_fp16);
  const TwoShotParams one = ReduceScatterParamsFor(p, Algorithm::kOneShot);
  EXPECT_EQ(one.codec, Codec::kFp);
  EXPECT_FALSE(one.cast_bf16_to_fp16);
  EXPECT_EQ(one.num_elems, 64);
}

TEST(ReduceScatterValidateTest, RejectsBadParams) {
  std::vector<uint16_t> in(8 * 16), out(16);
  std::vector<const uint16_t*> ins(8, in.data());
  std::vector<uint16_t*> outs(8, out.data());
  EXPECT_THAT(
      ReferenceReduceScatter(MakeParams(4, Codec::kInt3, Mode::kFp16, 16), ins.data(), outs.data()),
      StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("INT3")));
  EXPECT_THAT(
      ReferenceReduceScatter(MakeParams(2, Codec::kFp, Mode::kFp16, 12), ins.data(), outs.data()),
      StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("multiple of 8")));
  EXPECT_THAT(
      ReferenceReduceScatter(MakeParams(3, Codec::kFp, Mode::kFp16, 16), ins.data(), outs.data()),
      StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(
      ReferenceReduceScatter(MakeParams(2, Codec::kFp, Mode::kFp16, 0), ins.data(), outs.data()));
}

TEST(CollectiveLayoutTest, TilesAndIndices) {
  EXPECT_EQ(CollectiveTiles(0, 2), 0);
  EXPECT_EQ(CollectiveTiles(8, 2), 1);
  EXPECT_EQ(CollectiveTiles(ShardElems(4), 4), 1);
  EXPECT_EQ(CollectiveTiles(ShardElems(4) + 8, 4), 2);
  EXPECT_EQ(CollectiveMessageIndex(100, 2, 3, 5, 8), 3 * 100 + 2 * ShardElems(8) + 5);
}

}  // namespace
}  // namespace qr::kernels
