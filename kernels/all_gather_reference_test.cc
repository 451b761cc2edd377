#include "kernels/all_gather_reference.h"

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/collective_error_bound.h"
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

using Buffers = std::vector<std::vector<uint16_t>>;

Buffers RandomInputs(const TwoShotParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Buffers in(p.world_size);
  for (auto& v : in) {
    v.resize((p.num_elems + 31) / 32 * 32);
    testing::FillRandomBlocks(p.dtype, rng, 0, v.data(), v.size());
    v.resize(p.num_elems);
  }
  return in;
}

constexpr uint16_t kSentinel = 0x5A5A;
constexpr int kGuard = 8;

Buffers RunGather(const TwoShotParams& p, const Buffers& in) {
  const int64_t total = p.world_size * p.num_elems;
  Buffers out(p.world_size, std::vector<uint16_t>(total + kGuard, kSentinel));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < p.world_size; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  EXPECT_OK(ReferenceAllGather(p, ins.data(), outs.data()));
  for (auto& o : out) {
    for (int g = 0; g < kGuard; ++g) EXPECT_EQ(o[total + g], kSentinel) << "wrote past the end";
    o.resize(total);
  }
  for (int r = 1; r < p.world_size; ++r) EXPECT_EQ(out[r], out[0]) << "rank " << r;
  return out;
}

std::vector<int64_t> Sizes(int ws) {
  return {8, 24, 40, ShardElems(ws), ShardElems(ws) + 8, 3 * ShardElems(ws) - 24, kTileElems + 56};
}

// FP copies bits, NaN payloads, infinities and -0 included, whatever the
// cast asks (the cast would clip bf16 beyond ±65504).
TEST(AllGatherFpTest, CopiesBitsExactly) {
  for (int ws : {2, 4, 8}) {
    for (Mode mode : {Mode::kFp16, Mode::kBf16, Mode::kBf16Cast}) {
      for (int64_t n : Sizes(ws)) {
        TwoShotParams p = MakeParams(ws, Codec::kFp, mode, n);
        Buffers in(ws, std::vector<uint16_t>(n));
        std::mt19937_64 rng(n + ws);
        for (auto& v : in) {
          for (auto& x : v) x = static_cast<uint16_t>(rng());  // every pattern, NaNs included
        }
        in[0][0] = 0x7D01;  // an fp16 NaN with a payload / a huge bf16
        in[ws - 1][n - 1] = 0x8000;
        const Buffers out = RunGather(p, in);
        for (int q = 0; q < ws; ++q) {
          ASSERT_EQ(std::memcmp(out[0].data() + q * n, in[q].data(), n * 2), 0)
              << "ws " << ws << " n " << n << " source " << q;
        }
      }
    }
  }
}

using Combo = std::tuple<int, Codec, Mode>;
std::vector<Combo> QuantizedCombos() {
  std::vector<Combo> combos;
  for (int ws : {2, 4, 8}) {
    for (Codec c : kAllCodecs) {
      if (c == Codec::kFp || !CodecRunsAtWorldSize(c, ws)) continue;
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

class AllGatherTest : public ::testing::TestWithParam<Combo> {};

// The specification: the two-shot's phase 2 of the permuted message
// (kernels/collective_layout.h), each rank's values standing for its reduced
// shard: EncodeReducedShard of the (cast) values, DecodeOutputShard.
TEST_P(AllGatherTest, IsTheTwoShotPhaseTwoOfThePermutedMessage) {
  const auto [ws, codec, mode] = GetParam();
  for (int64_t n : Sizes(ws)) {
    const TwoShotParams p = MakeParams(ws, codec, mode, n);
    const Buffers in = RandomInputs(p, 11 + n);
    const Buffers out = RunGather(p, in);
    const int64_t se = ShardElems(ws);
    const int64_t tiles = (n + se - 1) / se;
    TwoShotParams m = p;
    m.num_elems = tiles * kTileElems;
    std::vector<uint16_t> permuted(m.num_elems);
    std::vector<uint8_t> wire(ShardWireBytes(codec, ws));
    std::vector<uint16_t> shard(se);
    const bool cast = p.cast_bf16_to_fp16 && p.dtype == DType::kBFloat16;
    for (int64_t t = 0; t < tiles; ++t) {
      for (int q = 0; q < ws; ++q) {
        for (int64_t i = 0; i < se; ++i) {
          const uint16_t v = t * se + i < n ? in[q][t * se + i] : 0;
          shard[i] = cast ? BFloat16ToHalf(v) : v;
        }
        EncodeReducedShard(m, shard.data(), wire.data());
        DecodeOutputShard(m, wire.data(), t, q, permuted.data());
      }
    }
    for (int64_t t = 0; t < tiles; ++t) {
      for (int q = 0; q < ws; ++q) {
        for (int64_t i = 0; i < se && t * se + i < n; ++i) {
          ASSERT_EQ(out[0][q * n + t * se + i], permuted[t * kTileElems + q * se + i])
              << "n=" << n << " source " << q << " tile " << t << " value " << i;
        }
      }
    }
  }
}

TEST_P(AllGatherTest, LossyWithinItsBound) {
  const auto [ws, codec, mode] = GetParam();
  for (int64_t n : Sizes(ws)) {
    const TwoShotParams p = MakeParams(ws, codec, mode, n);
    const Buffers in = RandomInputs(p, 5 + n);
    const Buffers out = RunGather(p, in);
    std::vector<const uint16_t*> ins;
    for (auto& v : in) ins.push_back(v.data());
    const BoundCheck c = CheckAllGatherOutput(p, ins.data(), out[0].data());
    EXPECT_EQ(c.violations, 0) << "n=" << n << " worst " << c.worst_index << " ratio "
                               << c.max_ratio;
    EXPECT_EQ(c.skipped, 0);
    EXPECT_GT(c.max_error, 0.0) << "a quantized all-gather of random data should lose something";
  }
}

TEST_P(AllGatherTest, InPlaceMatchesOutOfPlace) {
  const auto [ws, codec, mode] = GetParam();
  const TwoShotParams p = MakeParams(ws, codec, mode, 2 * ShardElems(ws) + 24);
  const Buffers in = RandomInputs(p, 42);
  const Buffers want = RunGather(p, in);
  Buffers out(ws, std::vector<uint16_t>(ws * p.num_elems));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < ws; ++r) {
    std::copy(in[r].begin(), in[r].end(), out[r].begin() + r * p.num_elems);
    ins.push_back(out[r].data() + r * p.num_elems);
    outs.push_back(out[r].data());
  }
  ASSERT_OK(ReferenceAllGather(p, ins.data(), outs.data()));
  for (int r = 0; r < ws; ++r) EXPECT_EQ(out[r], want[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Quantized, AllGatherTest, ::testing::ValuesIn(QuantizedCombos()),
                         ComboName);

TEST(AllGatherBoundTest, ZeroForFpAndPositiveOtherwise) {
  EXPECT_EQ(AllGatherErrorBound(Codec::kFp, DType::kBFloat16, true, 1e6, 1e6), 0.0);
  EXPECT_GT(AllGatherErrorBound(Codec::kInt8, DType::kFloat16, false, 1.0, 0.5), 0.0);
  EXPECT_LT(AllGatherErrorBound(Codec::kInt8, DType::kFloat16, false, 1.0, 0.5),
            AllGatherErrorBound(Codec::kInt4, DType::kFloat16, false, 1.0, 0.5));
}

TEST(AllGatherParamsTest, OneShotIsFp) {
  const TwoShotParams p = MakeParams(2, Codec::kInt6, Mode::kBf16Cast, 16);
  EXPECT_EQ(AllGatherParamsFor(p, Algorithm::kTwoShot).codec, Codec::kInt6);
  EXPECT_EQ(AllGatherParamsFor(p, Algorithm::kOneShot).codec, Codec::kFp);
  EXPECT_EQ(AllGatherWorkDType(AllGatherParamsFor(p, Algorithm::kOneShot)), DType::kBFloat16);
  EXPECT_EQ(AllGatherWorkDType(p), DType::kFloat16);
}

TEST(AllGatherValidateTest, RejectsBadParams) {
  std::vector<uint16_t> in(16), out(8 * 16);
  std::vector<const uint16_t*> ins(8, in.data());
  std::vector<uint16_t*> outs(8, out.data());
  EXPECT_THAT(
      ReferenceAllGather(MakeParams(8, Codec::kInt3, Mode::kFp16, 16), ins.data(), outs.data()),
      StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("INT3")));
  EXPECT_THAT(
      ReferenceAllGather(MakeParams(2, Codec::kFp, Mode::kFp16, 4), ins.data(), outs.data()),
      StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("multiple of 8")));
}

}  // namespace
}  // namespace qr::kernels
