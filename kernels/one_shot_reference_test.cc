#include "kernels/one_shot_reference.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/test_data.h"
#include "kernels/two_shot_reference.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;

struct Mode {
  DType dtype;
  bool cast;
  const char* name;
};
constexpr Mode kModes[] = {{DType::kFloat16, false, "fp16"},
                           {DType::kBFloat16, false, "bf16"},
                           {DType::kBFloat16, true, "bf16cast"}};

TwoShotParams Params(int ws, const Mode& m, int64_t n, Codec codec = Codec::kFp) {
  TwoShotParams p;
  p.world_size = ws;
  p.codec = codec;
  p.dtype = m.dtype;
  p.cast_bf16_to_fp16 = m.cast;
  p.num_elems = n;
  return p;
}

// Random blocks (any magnitude, the extremes included) with a sprinkling of
// the bit patterns one-shot treats specially: 0xFFFF and 0xFFFE (NaNs), ±0,
// ±inf, and the largest finite values.
std::vector<std::vector<uint16_t>> Inputs(const TwoShotParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint16_t specials[] = {0xFFFF, 0xFFFE, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7BFF,
                               0xFBFF, 0x7F80, 0xFF80, 0x7F7F, 0x7FC0, 0x0001, 0x8001};
  std::vector<std::vector<uint16_t>> in(p.world_size);
  for (auto& v : in) {
    v.resize((p.num_elems + 31) / 32 * 32);
    testing::FillRandomBlocks(p.dtype, rng, 0, v.data(), static_cast<int64_t>(v.size()));
    v.resize(p.num_elems);
    for (size_t i = 0; i < v.size(); i += 1 + rng() % 97) v[i] = specials[rng() % 14];
  }
  return in;
}

std::vector<std::vector<uint16_t>> AllReduce(bool one_shot, const TwoShotParams& p,
                                             const std::vector<std::vector<uint16_t>>& in) {
  std::vector<std::vector<uint16_t>> out(p.world_size, std::vector<uint16_t>(p.num_elems, 0x1234));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < p.world_size; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  const Status s = one_shot ? ReferenceOneShotAllReduce(p, ins.data(), outs.data())
                            : ReferenceAllReduce(p, ins.data(), outs.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// The promise the GPU kernel and the policy rely on: one-shot is two-shot FP
// without the cast, bit for bit, at every world size and dtype.
TEST(OneShotReferenceTest, EqualsTwoShotFpBitForBit) {
  for (int ws : {2, 4, 8}) {
    for (const Mode& m : kModes) {
      for (int64_t n : {int64_t{8}, int64_t{256}, int64_t{16384 + 8}, OneShotMaxElems(ws)}) {
        SCOPED_TRACE(std::to_string(ws) + " " + m.name + " n=" + std::to_string(n));
        const TwoShotParams p = Params(ws, m, n);
        const auto in = Inputs(p, static_cast<uint64_t>(ws * 1000 + n));
        const auto one = AllReduce(true, p, in);
        TwoShotParams uncast = p;
        uncast.cast_bf16_to_fp16 = false;
        const auto two = AllReduce(false, uncast, in);
        for (int r = 0; r < ws; ++r) {
          ASSERT_EQ(one[r], two[r]) << "rank " << r;
          ASSERT_EQ(one[r], one[0]) << "ranks disagree";
        }
      }
    }
  }
}

// One-shot carries exact values whatever codec the call names.
TEST(OneShotReferenceTest, IgnoresTheCodec) {
  const TwoShotParams fp = Params(2, kModes[0], 4096);
  const auto in = Inputs(fp, 7);
  const auto want = AllReduce(true, fp, in);
  for (Codec c : {Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3}) {
    EXPECT_EQ(AllReduce(true, Params(2, kModes[0], 4096, c), in), want) << CodecName(c);
  }
}

TEST(OneShotReferenceTest, WireValueIsNeverZeroAndInverts) {
  for (const Mode& m : kModes) {
    const TwoShotParams p = Params(2, m, 8);
    for (uint32_t v = 0; v <= 0xFFFF; ++v) {
      const uint16_t w = OneShotWireValue(p, static_cast<uint16_t>(v));
      ASSERT_NE(w, 0) << m.name << " input " << v;
      if (v != 0xFFFF) {
        ASSERT_EQ(static_cast<uint16_t>(~w), v) << m.name;
      }
    }
  }
}

TEST(OneShotReferenceTest, InPlace) {
  const TwoShotParams p = Params(4, kModes[1], 1000);
  auto in = Inputs(p, 11);
  const auto want = AllReduce(true, p, in);
  std::vector<uint16_t*> ptrs;
  for (auto& v : in) ptrs.push_back(v.data());
  ASSERT_TRUE(
      ReferenceOneShotAllReduce(p, const_cast<const uint16_t* const*>(ptrs.data()), ptrs.data())
          .ok());
  EXPECT_EQ(in, want);
}

TEST(OneShotReferenceTest, RejectsWhatDoesNotFit) {
  for (int ws : {2, 4, 8}) {
    EXPECT_OK(ValidateOneShotParams(Params(ws, kModes[0], OneShotMaxElems(ws))));
    EXPECT_THAT(ValidateOneShotParams(Params(ws, kModes[0], OneShotMaxElems(ws) + 8)),
                StatusIs(StatusCode::kInvalidArgument));
  }
  EXPECT_THAT(ValidateOneShotParams(Params(3, kModes[0], 8)),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateOneShotParams(Params(2, kModes[0], 12)),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(OneShotMaxElems(2) * 2 * 2, kOneShotRegionBytes);
}

}  // namespace
}  // namespace qr::kernels
