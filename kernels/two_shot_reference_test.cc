#include "kernels/two_shot_reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/error_bound.h"
#include "kernels/float16.h"
#include "kernels/packed_two_shot.h"
#include "kernels/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;

// How a call treats its dtype: fp16, bf16 reduced as bf16, bf16 cast to fp16.
enum class Mode { kFp16, kBf16, kBf16Cast };
constexpr Mode kModes[] = {Mode::kFp16, Mode::kBf16, Mode::kBf16Cast};

const char* ModeName(Mode m) {
  return m == Mode::kFp16 ? "fp16" : m == Mode::kBf16 ? "bf16" : "bf16cast";
}

TwoShotParams MakeParams(int ws, Codec codec, Mode mode, int64_t n) {
  TwoShotParams p;
  p.world_size = ws;
  p.codec = codec;
  p.dtype = mode == Mode::kFp16 ? DType::kFloat16 : DType::kBFloat16;
  p.cast_bf16_to_fp16 = mode == Mode::kBf16Cast;
  p.num_elems = n;
  return p;
}

// Random finite inputs; bf16 data is kept small enough that fp32 sums cannot
// overflow (the bound's stated domain).
std::vector<std::vector<uint16_t>> RandomInputs(const TwoShotParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double limit = p.dtype == DType::kFloat16 ? 0 : 1e37;
  std::vector<std::vector<uint16_t>> in(p.world_size);
  for (auto& v : in) {
    v.resize((p.num_elems + 31) / 32 * 32);
    testing::FillRandomBlocks(p.dtype, rng, limit, v.data(), v.size());
    v.resize(p.num_elems);
  }
  return in;
}

struct Result {
  std::vector<std::vector<uint16_t>> out;
  BoundCheck check;
};

constexpr uint16_t kSentinel = 0x5A5A;
constexpr int kGuard = 24;

// Runs the reference (with guard values past the end) and checks ranks agree.
Result RunAndCheck(const TwoShotParams& p, const std::vector<std::vector<uint16_t>>& in) {
  Result r;
  r.out.assign(p.world_size, std::vector<uint16_t>(p.num_elems + kGuard, kSentinel));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int i = 0; i < p.world_size; ++i) {
    ins.push_back(in[i].data());
    outs.push_back(r.out[i].data());
  }
  EXPECT_OK(ReferenceAllReduce(p, ins.data(), outs.data()));
  for (int i = 0; i < p.world_size; ++i) {
    for (int g = 0; g < kGuard; ++g) EXPECT_EQ(r.out[i][p.num_elems + g], kSentinel);
    if (i > 0) {
      EXPECT_EQ(std::memcmp(r.out[i].data(), r.out[0].data(), p.num_elems * 2), 0)
          << "rank " << i << " differs from rank 0";
    }
  }
  r.check = CheckTwoShotOutput(p, ins.data(), r.out[0].data());
  return r;
}

TEST(TwoShotGeometryTest, ShardsFitTheirFixedSlotsForEveryCodec) {
  for (int ws : {2, 4, 8}) {
    EXPECT_EQ(ShardElems(ws) * ws, kTileElems);
    EXPECT_EQ(ShardElems(ws) % kAtomRowElems, 0);
    for (Codec c : kAllCodecs) {
      EXPECT_LE(ShardWireBytes(c, ws), SourceStrideBytes(ws)) << CodecName(c);
      EXPECT_EQ(ShardWireBytes(c, ws) % 16, 0);
    }
    EXPECT_EQ(ShardWireBytes(Codec::kInt4, ws), 9216 / ws);
    // Distinct (slot, phase, source) regions tile the buffer without overlap.
    const int64_t slots = 3;
    std::vector<int> owner(RecvBufferBytes(slots) / 16, -1);
    for (int64_t slot = 0; slot < slots; ++slot) {
      for (int phase = 0; phase < 2; ++phase) {
        for (int src = 0; src < ws; ++src) {
          const int64_t off = RecvOffset(slots, slot, phase, src, ws);
          ASSERT_EQ(off % 16, 0);
          for (int64_t b = off; b < off + SourceStrideBytes(ws); b += 16) {
            ASSERT_EQ(owner[b / 16], -1) << "overlap at " << b;
            owner[b / 16] = 1;
          }
        }
      }
    }
  }
  EXPECT_EQ(NumTiles(0), 0);
  EXPECT_EQ(NumTiles(8), 1);
  EXPECT_EQ(NumTiles(kTileElems), 1);
  EXPECT_EQ(NumTiles(kTileElems + 8), 2);
}

TEST(TwoShotValidateTest, RejectsBadParams) {
  EXPECT_OK(ValidateTwoShotParams(MakeParams(2, Codec::kInt3, Mode::kFp16, 16)));
  EXPECT_THAT(ValidateTwoShotParams(MakeParams(4, Codec::kInt3, Mode::kFp16, 16)),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("INT3")));
  EXPECT_THAT(ValidateTwoShotParams(MakeParams(8, Codec::kInt3, Mode::kBf16, 16)),
              StatusIs(StatusCode::kInvalidArgument));
  for (int ws : {0, 1, 3, 6, 16}) {
    EXPECT_THAT(ValidateTwoShotParams(MakeParams(ws, Codec::kFp, Mode::kFp16, 16)),
                StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("world size")));
  }
  EXPECT_THAT(ValidateTwoShotParams(MakeParams(2, Codec::kFp, Mode::kFp16, 12)),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("multiple of 8")));
  EXPECT_THAT(ValidateTwoShotParams(MakeParams(2, Codec::kFp, Mode::kFp16, -8)),
              StatusIs(StatusCode::kInvalidArgument));
  TwoShotParams bad = MakeParams(2, Codec::kFp, Mode::kFp16, 8);
  bad.codec = static_cast<Codec>(5);
  EXPECT_THAT(ValidateTwoShotParams(bad), StatusIs(StatusCode::kInvalidArgument));
  bad = MakeParams(2, Codec::kFp, Mode::kFp16, 8);
  bad.dtype = static_cast<DType>(2);
  EXPECT_THAT(ValidateTwoShotParams(bad), StatusIs(StatusCode::kInvalidArgument));
  std::vector<uint16_t> in(16), out(16);
  const uint16_t* ins[4] = {in.data(), in.data(), in.data(), in.data()};
  uint16_t* outs[4] = {out.data(), out.data(), out.data(), out.data()};
  EXPECT_THAT(ReferenceAllReduce(MakeParams(4, Codec::kInt3, Mode::kFp16, 16), ins, outs),
              StatusIs(StatusCode::kInvalidArgument));
}

using Combo = std::tuple<int, Codec, Mode>;

std::vector<Combo> AllCombos() {
  std::vector<Combo> combos;
  for (int ws : {2, 4, 8}) {
    for (Codec c : kAllCodecs) {
      if (c == Codec::kInt3 && ws != 2) continue;
      for (Mode m : kModes) combos.emplace_back(ws, c, m);
    }
  }
  return combos;
}

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  return "ws" + std::to_string(std::get<0>(info.param)) + "_" + CodecName(std::get<1>(info.param)) +
         "_" + ModeName(std::get<2>(info.param));
}

class TwoShotTest : public ::testing::TestWithParam<Combo> {};

// Sizes that fill no tile, exactly one tile, and end inside a tile, an atom
// row or a 32-value block.
TEST_P(TwoShotTest, RanksBitIdenticalWithinBoundForPartialTiles) {
  const auto [ws, codec, mode] = GetParam();
  for (int64_t n : {int64_t{0}, int64_t{8}, int64_t{2048 + 8}, kTileElems, 3 * kTileElems - 24,
                    int64_t{40000}}) {
    const TwoShotParams p = MakeParams(ws, codec, mode, n);
    const auto in = RandomInputs(p, 17 + n);
    const Result r = RunAndCheck(p, in);
    EXPECT_EQ(r.check.violations, 0) << "n=" << n << " worst index " << r.check.worst_index;
    EXPECT_EQ(r.check.skipped, 0);
  }
}

// In place (output == input) gives the same bits as out of place.
TEST_P(TwoShotTest, InPlaceMatchesOutOfPlace) {
  const auto [ws, codec, mode] = GetParam();
  const TwoShotParams p = MakeParams(ws, codec, mode, kTileElems + 2048 + 64);
  auto in = RandomInputs(p, 5);
  const Result r = RunAndCheck(p, in);
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (auto& v : in) {
    ins.push_back(v.data());
    outs.push_back(v.data());
  }
  ASSERT_OK(ReferenceAllReduce(p, ins.data(), outs.data()));
  for (int i = 0; i < ws; ++i) {
    EXPECT_EQ(std::memcmp(in[i].data(), r.out[0].data(), p.num_elems * 2), 0) << i;
  }
}

// The host backend's way: each rank runs the step functions against per-rank
// receive buffers addressed with RecvOffset (several slots, tiles spread over
// them). It must give exactly ReferenceAllReduce's bits.
TEST_P(TwoShotTest, StepFunctionsOverReceiveBuffersMatchReference) {
  const auto [ws, codec, mode] = GetParam();
  const TwoShotParams p = MakeParams(ws, codec, mode, 4 * kTileElems + 4096 + 8);
  const auto in = RandomInputs(p, 77);
  const Result ref = RunAndCheck(p, in);
  const int64_t slots = 3;
  std::vector<std::vector<uint8_t>> recv(ws, std::vector<uint8_t>(RecvBufferBytes(slots), 0xEE));
  std::vector<std::vector<uint16_t>> out(ws, std::vector<uint16_t>(p.num_elems, kSentinel));
  std::vector<uint16_t> reduced(ShardElems(ws));
  std::vector<const uint8_t*> received(ws);
  for (int64_t tile = 0; tile < NumTiles(p.num_elems); ++tile) {
    const int64_t slot = SlotOfTile(tile, slots);
    for (int me = 0; me < ws; ++me) {
      for (int s = 0; s < ws; ++s) {
        EncodeInputShard(p, in[me].data(), tile, s,
                         recv[s].data() + RecvOffset(slots, slot, 0, me, ws));
      }
    }
    for (int me = 0; me < ws; ++me) {
      for (int s = 0; s < ws; ++s)
        received[s] = recv[me].data() + RecvOffset(slots, slot, 0, s, ws);
      ReduceShard(p, received.data(), reduced.data());
      for (int dst = 0; dst < ws; ++dst) {
        EncodeReducedShard(p, reduced.data(),
                           recv[dst].data() + RecvOffset(slots, slot, 1, me, ws));
      }
    }
    for (int me = 0; me < ws; ++me) {
      for (int s = 0; s < ws; ++s) {
        DecodeOutputShard(p, recv[me].data() + RecvOffset(slots, slot, 1, s, ws), tile, s,
                          out[me].data());
      }
    }
  }
  for (int me = 0; me < ws; ++me) {
    EXPECT_EQ(std::memcmp(out[me].data(), ref.out[0].data(), p.num_elems * 2), 0) << me;
  }
}

// Every rank's input is made of issue 3's adversarial blocks (zeros, one huge
// value among tiny ones, max below 1e-4, ±max, alternating signs, subnormals),
// in a different order per rank so that unlike blocks meet in the sums.
TEST_P(TwoShotTest, AdversarialBlocksWithinBound) {
  const auto [ws, codec, mode] = GetParam();
  TwoShotParams p = MakeParams(ws, codec, mode, 0);
  const auto blocks = testing::AdversarialBlocks(p.dtype);
  const int64_t nblocks = 2 * kTileElems / 32 + 5;  // two tiles and a bit
  p.num_elems = nblocks * 32;
  std::vector<std::vector<uint16_t>> in(ws);
  for (int r = 0; r < ws; ++r) {
    for (int64_t b = 0; b < nblocks; ++b) {
      const auto& block = blocks[(b * (r + 1) + r) % blocks.size()];
      in[r].insert(in[r].end(), block.begin(), block.end());
    }
    if (p.dtype == DType::kBFloat16) {
      // Keep fp32 sums finite (the bound's domain): ±max/16 instead of ±max.
      for (auto& v : in[r]) {
        if (std::fabs(BFloat16ToFloat(v)) > 1e37f) v = FloatToBFloat16(BFloat16ToFloat(v) / 16);
      }
    }
  }
  const Result r = RunAndCheck(p, in);
  EXPECT_EQ(r.check.violations, 0) << "worst index " << r.check.worst_index;
  EXPECT_EQ(r.check.skipped, 0);
  for (int64_t i = 0; i < p.num_elems; ++i) ASSERT_TRUE(IsFinite16(p.dtype, r.out[0][i])) << i;
}

INSTANTIATE_TEST_SUITE_P(AllCombos, TwoShotTest, ::testing::ValuesIn(AllCombos()), ComboName);

// Inputs for the value-equality tests: random blocks over the whole range
// (sums that saturate included), every adversarial block at a rotating
// offset per rank, and a few inf/NaN values.
std::vector<std::vector<uint16_t>> MixedInputs(const TwoShotParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint16_t>> in(p.world_size);
  const auto adversarial = testing::AdversarialBlocks(p.dtype);
  for (int r = 0; r < p.world_size; ++r) {
    in[r].resize((p.num_elems + 31) / 32 * 32);
    testing::FillRandomBlocks(p.dtype, rng, 0, in[r].data(), in[r].size());
    for (size_t b = 0; b < adversarial.size(); ++b) {
      const size_t at = ((b * 3 + r) % adversarial.size()) * 32 + 64 * 32;
      std::copy(adversarial[b].begin(), adversarial[b].end(), in[r].begin() + at);
    }
    in[r].resize(p.num_elems);
    in[r][5000 + r] = InfBits(p.dtype);
    in[r][9000 + 64 * r] = CanonicalNaN(p.dtype) | 0x0003;
  }
  return in;
}

// Runs the reference and returns rank 0's output (ranks agree: RunAndCheck
// checks that elsewhere).
std::vector<uint16_t> ReferenceOutput(const TwoShotParams& p,
                                      const std::vector<std::vector<uint16_t>>& in) {
  std::vector<std::vector<uint16_t>> out(p.world_size, std::vector<uint16_t>(p.num_elems));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < p.world_size; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  EXPECT_OK(ReferenceAllReduce(p, ins.data(), outs.data()));
  return out[0];
}

int64_t FirstDifference(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

// The packed formats (INT3/INT4/INT6 on fp16, and on bf16 with the cast)
// compute exactly packed::TwoShotValues, the value oracle of
// docs/codecs.md section 9.4: every element, random and adversarial data,
// every world size, partial tiles and blocks.
TEST(TwoShotArithmeticTest, PackedFormatsEqualPackedTwoShotValues) {
  for (Codec codec : {Codec::kInt3, Codec::kInt4, Codec::kInt6}) {
    for (Mode mode : {Mode::kFp16, Mode::kBf16Cast}) {
      for (int ws : {2, 4, 8}) {
        if (codec == Codec::kInt3 && ws != 2) continue;
        const TwoShotParams p = MakeParams(ws, codec, mode, 2 * kTileElems + 4096 + 40);
        ASSERT_TRUE(UsesPackedArithmetic(codec, WorkDType(p.dtype, p.cast_bf16_to_fp16)));
        const auto in = MixedInputs(p, 4200 + ws);
        std::vector<const uint16_t*> ins;
        for (const auto& r : in) ins.push_back(r.data());
        std::vector<uint16_t> want(p.num_elems);
        packed::TwoShotValues(codec, p.dtype, ws, ins.data(), p.num_elems, want.data());
        const std::vector<uint16_t> got = ReferenceOutput(p, in);
        const int64_t diff = FirstDifference(got, want);
        EXPECT_EQ(diff, -1) << CodecName(codec) << " " << ModeName(mode) << " ws" << ws
                            << ": element " << diff << " is " << (diff < 0 ? 0 : got[diff])
                            << ", packed::TwoShotValues gives " << (diff < 0 ? 0 : want[diff]);
      }
    }
  }
}

// The fp32 formats (FP; INT8 for every dtype; INT3/INT4/INT6 on bf16
// without the cast) keep the values they had before wire layout v2: the
// layout moved their bytes, not their values. testing::Fp32TwoShotValues
// computes them block by block with no wire at all.
TEST(TwoShotArithmeticTest, Fp32FormatsKeepTheirValues) {
  for (int ws : {2, 4, 8}) {
    for (Codec codec : kAllCodecs) {
      if (codec == Codec::kInt3 && ws != 2) continue;
      for (Mode mode : kModes) {
        const TwoShotParams p = MakeParams(ws, codec, mode, kTileElems + 4096 + 40);
        if (UsesPackedArithmetic(codec, WorkDType(p.dtype, p.cast_bf16_to_fp16))) continue;
        const auto in = MixedInputs(p, 4300 + ws);
        std::vector<const uint16_t*> ins;
        for (const auto& r : in) ins.push_back(r.data());
        std::vector<uint16_t> want(p.num_elems);
        testing::Fp32TwoShotValues(codec, p.dtype, p.cast_bf16_to_fp16, ws, ins.data(), p.num_elems,
                                   want.data());
        const std::vector<uint16_t> got = ReferenceOutput(p, in);
        const int64_t diff = FirstDifference(got, want);
        EXPECT_EQ(diff, -1) << CodecName(codec) << " " << ModeName(mode) << " ws" << ws
                            << ": element " << diff;
      }
    }
  }
}

// The bound of a call is its format's: TwoShotErrorBound picks the packed
// arithmetic (packed::TwoShotErrorBound's) exactly for the packed formats,
// the fp32 one (TwoShotArithmetic{}) otherwise, and the two differ.
TEST(TwoShotBoundOfACallTest, IsTheBoundOfTheFormatsArithmetic) {
  const double absmax[] = {3.0, 1.5, 0.25, 7.0, 2.0, 0.5, 1.0, 4.0};
  const double element[] = {1.0, 1.5, 0.125, 6.0, 0.5, 0.25, 1.0, 3.0};
  for (int ws : {2, 4, 8}) {
    double exact = 0;
    for (int r = 0; r < ws; ++r) exact += element[r];
    for (Codec codec : kAllCodecs) {
      if (codec == Codec::kInt3 && ws != 2) continue;
      for (Mode mode : kModes) {
        const TwoShotParams p = MakeParams(ws, codec, mode, 8);
        const double bound =
            TwoShotErrorBound(codec, p.dtype, p.cast_bf16_to_fp16, ws, absmax, element, exact);
        const double fp32 = TwoShotErrorBound(TwoShotArithmetic{}, codec, p.dtype,
                                              p.cast_bf16_to_fp16, ws, absmax, element, exact);
        const std::string name =
            std::string(CodecName(codec)) + " " + ModeName(mode) + " ws" + std::to_string(ws);
        if (UsesPackedArithmetic(codec, WorkDType(p.dtype, p.cast_bf16_to_fp16))) {
          EXPECT_EQ(bound, packed::TwoShotErrorBound(codec, p.dtype, ws, absmax, element, exact))
              << name;
          EXPECT_NE(bound, fp32) << name;
        } else {
          EXPECT_EQ(bound, fp32) << name;
        }
      }
    }
  }
}

class TwoShotBoundTest : public ::testing::TestWithParam<std::tuple<Codec, Mode>> {};

// >= 10^7 random input values per codec and dtype (world size 2: 2 x 5.0e6;
// world size 8 adds 8 x 1.0e6 for the codecs that allow it).
TEST_P(TwoShotBoundTest, TenMillionValuesWithinBound) {
  const auto [codec, mode] = GetParam();
  for (int ws : {2, 8}) {
    if (codec == Codec::kInt3 && ws != 2) continue;
    const int64_t n = (ws == 2 ? 5000000 : 1000000) / 8 * 8;
    const TwoShotParams p = MakeParams(ws, codec, mode, n);
    const auto in = RandomInputs(p, 1000 + static_cast<int>(codec) * 3 + static_cast<int>(mode));
    const Result r = RunAndCheck(p, in);
    EXPECT_EQ(r.check.violations, 0) << "ws=" << ws << " worst index " << r.check.worst_index;
    std::printf("two-shot ws%d %s %s: worst error / bound = %.6f (%lld values)\n", ws,
                CodecName(codec), ModeName(mode), r.check.max_ratio,
                static_cast<long long>(n * ws));
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, TwoShotBoundTest,
                         ::testing::Combine(::testing::ValuesIn(kAllCodecs),
                                            ::testing::ValuesIn(kModes)),
                         [](const auto& info) {
                           return std::string(CodecName(std::get<0>(info.param))) + "_" +
                                  ModeName(std::get<1>(info.param));
                         });

// Not vacuous: INT4 two-shot on uniform data has the mean error the model
// predicts: three independent uniform rounding errors (two inputs, one sum)
// whose sum is close to normal, mean |e| = sqrt(2/pi) * sigma.
TEST(TwoShotTest, Int4MeanErrorOnUniformDataMatchesTheory) {
  const TwoShotParams p = MakeParams(2, Codec::kInt4, Mode::kFp16, 64 * kTileElems);
  std::mt19937_64 rng(3);
  std::vector<std::vector<uint16_t>> in(2, std::vector<uint16_t>(p.num_elems));
  for (auto& v : in) testing::FillUniform(p.dtype, rng, v.data(), v.size());
  const Result r = RunAndCheck(p, in);
  double theory = 0;
  for (int64_t b = 0; b < p.num_elems / 32; ++b) {
    double var = 0;
    double sum_absmax = 0;
    for (int rank = 0; rank < 2; ++rank) {
      double a = 0;
      for (int j = 0; j < 32; ++j)
        a = std::max(a, std::fabs(double{HalfToFloat(in[rank][b * 32 + j])}));
      var += (a / 7.5) * (a / 7.5) / 12;
    }
    for (int j = 0; j < 32; ++j) {
      sum_absmax = std::max(sum_absmax, std::fabs(double{HalfToFloat(in[0][b * 32 + j])} +
                                                  HalfToFloat(in[1][b * 32 + j])));
    }
    var += (sum_absmax / 7.5) * (sum_absmax / 7.5) / 12;
    theory += 32 * std::sqrt(2 / M_PI) * std::sqrt(var);
  }
  const double ratio = r.check.sum_error / theory;
  std::printf("two-shot INT4 ws2 uniform: mean error %.6g, theory %.6g, ratio %.4f\n",
              r.check.sum_error / p.num_elems, theory / p.num_elems, ratio);
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 2.0);
}

TEST(TwoShotTest, FpSumsSaturateInsteadOfOverflowing) {
  const TwoShotParams p = MakeParams(2, Codec::kFp, Mode::kFp16, 32);
  std::vector<std::vector<uint16_t>> in(2, std::vector<uint16_t>(32, kFp16Max));
  in[1][1] = 0xFBFF;  // 65504 + -65504 = 0
  const Result r = RunAndCheck(p, in);
  EXPECT_EQ(r.out[0][0], kFp16Max);
  EXPECT_EQ(r.out[0][1], 0x0000);
}

TEST(TwoShotTest, Bf16CastSaturatesAndNeverProducesInf) {
  for (Codec codec : kAllCodecs) {
    const TwoShotParams p = MakeParams(2, codec, Mode::kBf16Cast, 64);
    std::vector<std::vector<uint16_t>> in(2, std::vector<uint16_t>(64));
    for (int i = 0; i < 64; ++i) {
      in[0][i] = FloatToBFloat16(i % 2 ? 1e5f : -3e38f);
      in[1][i] = FloatToBFloat16(i % 3 ? 7e4f : 1.0f);
    }
    const Result r = RunAndCheck(p, in);
    for (int i = 0; i < 64; ++i) {
      ASSERT_TRUE(IsFinite16(DType::kBFloat16, r.out[0][i])) << CodecName(codec) << " " << i;
    }
    EXPECT_EQ(r.check.violations, 0) << CodecName(codec);
    if (codec == Codec::kFp) {
      // 1e5 + 7e4 -> 65504 + 65504 -> 65504 (fp16) -> 65536 (bf16).
      EXPECT_EQ(r.out[0][1], FloatToBFloat16(65536.0f));
    }
  }
}

TEST(TwoShotTest, FpPropagatesInfAndNaN) {
  for (Mode mode : kModes) {
    const TwoShotParams p = MakeParams(4, Codec::kFp, mode, 2048);
    const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
    std::vector<std::vector<uint16_t>> in(4, std::vector<uint16_t>(2048, FromFloat(p.dtype, 1.0f)));
    in[1][10] = InfBits(p.dtype);
    in[2][20] = InfBits(p.dtype);
    in[3][20] = 0x8000 | InfBits(p.dtype);
    in[0][30] = CanonicalNaN(p.dtype) | 0x0011;  // a NaN with payload
    const Result r = RunAndCheck(p, in);
    EXPECT_EQ(r.out[0][10], InfBits(p.dtype)) << ModeName(mode);
    EXPECT_EQ(r.out[0][20], CanonicalNaN(p.dtype)) << ModeName(mode);
    EXPECT_EQ(r.out[0][30], CanonicalNaN(p.dtype)) << ModeName(mode);
    EXPECT_EQ(r.out[0][11], FromFloat(p.dtype, 4.0f));
    EXPECT_EQ(r.check.skipped, 32);  // 10, 20, 30 share block 0
    EXPECT_TRUE(IsFinite16(work, FromFloat(work, ToFloat(p.dtype, r.out[0][40]))));
  }
}

TEST(TwoShotTest, IntCodecsTurnABlockWithInfOrNaNIntoNaN) {
  for (Codec codec : {Codec::kInt8, Codec::kInt6, Codec::kInt4}) {
    for (Mode mode : kModes) {
      const TwoShotParams p = MakeParams(4, codec, mode, 4096);
      std::vector<std::vector<uint16_t>> in(4,
                                            std::vector<uint16_t>(4096, FromFloat(p.dtype, 0.5f)));
      in[2][100] = InfBits(p.dtype);        // block 3
      in[1][3000] = CanonicalNaN(p.dtype);  // block 93
      const Result r = RunAndCheck(p, in);
      for (int i = 0; i < 4096; ++i) {
        const bool poisoned = i / 32 == 3 || i / 32 == 93;
        const uint16_t v = r.out[0][i];
        if (poisoned) {
          ASSERT_EQ(v, CanonicalNaN(p.dtype)) << i;
        } else {
          ASSERT_TRUE(IsFinite16(p.dtype, v)) << i;
        }
      }
      EXPECT_EQ(r.check.violations, 0);
      EXPECT_EQ(r.check.skipped, 64);
    }
  }
}

}  // namespace
}  // namespace qr::kernels
