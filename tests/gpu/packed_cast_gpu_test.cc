// The bf16 cast's device conversions on the GPU, for every 16-bit input in
// both halves of a pair: the packed conversions (platform/math.cuh) against
// their host model (kernels/gpu/packed_cast.h, itself checked against
// kernels/float16.h in CI), and Elem<kBf16Cast>::In / Out and the integer
// codecs' InputBlock, with their exact paths, against float16.h bit for bit.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/float16.h"
#include "kernels/gpu/packed_cast.h"
#include "kernels/platform/gpu_api.h"
#include "tests/gpu/packed_cast_kernels.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

namespace model = ::qr::kernels::gpu::cast_model;
using ::qr::kernels::BFloat16ToHalf;
using ::qr::kernels::HalfToBFloat16;

uint16_t Half(const std::vector<uint32_t>& words, size_t i) {
  return static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2)));
}

std::vector<uint32_t> Words(const std::vector<uint16_t>& values) {
  std::vector<uint32_t> w((values.size() + 1) / 2, 0);
  for (size_t i = 0; i < values.size(); ++i)
    w[i / 2] |= static_cast<uint32_t>(values[i]) << (16 * (i % 2));
  return w;
}

// Every 16-bit value once, in order from `offset` (so offsets 0 and 1 put
// each value in both halves of a word); with `special` set, the last value
// of every atom becomes `special`, which sends the whole atom to the exact
// path.
std::vector<uint16_t> Stream(uint32_t offset, int special = -1) {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i + offset);
  if (special >= 0) {
    for (size_t i = 7; i < v.size(); i += 8) v[i] = static_cast<uint16_t>(special);
  }
  return v;
}

// Every value once in a fixed random order: most atoms mix kinds of values.
std::vector<uint16_t> Shuffled(uint32_t seed) {
  std::vector<uint16_t> v(65536);
  std::iota(v.begin(), v.end(), uint16_t{0});
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

std::vector<std::vector<uint16_t>> Layouts(uint16_t special) {
  return {Stream(0), Stream(1), Stream(0, special), Stream(1, special), Shuffled(18), Shuffled(19)};
}

class PackedCastGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::DeviceCount() == 0) GTEST_SKIP() << "needs a GPU, found none";
  }
};

// The packed conversions compute the model: the same bits, NaN for NaN.
TEST_F(PackedCastGpuTest, PackedConversionsAreTheModelForEveryInput) {
  for (const auto& values : Layouts(0x7FFF)) {
    const std::vector<uint32_t> in = Words(values);
    std::vector<uint32_t> to_half(in.size()), to_bf16(in.size());
    ASSERT_OK(RunCastOp(CastOp::kBf16x2ToFp16x2, in.data(), to_half.data(), nullptr, in.size()));
    ASSERT_OK(RunCastOp(CastOp::kFp16x2ToBf16x2, in.data(), to_bf16.data(), nullptr, in.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = model::Bf16ToFp16Rn(values[i]);
      const uint16_t b = model::Fp16ToBf16Rn(values[i]);
      if (model::IsNaNFp16(h)) {
        ASSERT_TRUE(model::IsNaNFp16(Half(to_half, i))) << std::hex << values[i];
      } else {
        ASSERT_EQ(Half(to_half, i), h) << std::hex << values[i];
      }
      if (model::IsNaNBf16(b)) {
        ASSERT_TRUE(model::IsNaNBf16(Half(to_bf16, i))) << std::hex << values[i];
      } else {
        ASSERT_EQ(Half(to_bf16, i), b) << std::hex << values[i];
      }
    }
  }
}

// In and Out, the exact path included, are float16.h's casts; the test that
// picks the path fires exactly on atoms with an inf or NaN half.
TEST_F(PackedCastGpuTest, InAndOutAreTheCastsForEveryInput) {
  size_t exact_in = 0, exact_out = 0;
  for (uint16_t special : {uint16_t{0x7FFF}, uint16_t{0xFC00}, uint16_t{0x4780}}) {
    for (const auto& values : Layouts(special)) {
      const std::vector<uint32_t> in = Words(values);
      std::vector<uint32_t> half(in.size()), bf16(in.size()), fired(in.size());
      ASSERT_OK(RunCastOp(CastOp::kIn, in.data(), half.data(), nullptr, in.size()));
      ASSERT_OK(RunCastOp(CastOp::kOut, in.data(), bf16.data(), nullptr, in.size()));
      ASSERT_OK(RunCastOp(CastOp::kNonFinite, in.data(), fired.data(), nullptr, in.size()));
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(Half(half, i), BFloat16ToHalf(values[i])) << std::hex << values[i];
        ASSERT_EQ(Half(bf16, i), HalfToBFloat16(values[i])) << std::hex << values[i];
      }
      for (size_t a = 0; a < in.size() / 4; ++a) {
        bool non_finite = false, any_big = false;
        for (size_t j = 8 * a; j < 8 * a + 8; ++j) {
          non_finite = non_finite || model::IsNonFiniteHalf(values[j]);
          any_big = any_big || model::IsNonFiniteHalf(model::Bf16ToFp16Rn(values[j]));
        }
        ASSERT_EQ(fired[4 * a], non_finite ? 1u : 0u) << "atom " << a;
        exact_out += non_finite;
        exact_in += any_big;
      }
    }
  }
  // Both paths ran: the ordered layouts have whole atoms of small values.
  const size_t atoms = 3 * 6 * 65536 / 8;
  EXPECT_GT(exact_in, 0u);
  EXPECT_LT(exact_in, atoms);
  EXPECT_GT(exact_out, 0u);
  EXPECT_LT(exact_out, atoms);
}

// The integer codecs' conversion: every value is the saturating cast and
// every block maximum that of the cast block, in warps with and without
// blocks past fp16's range.
TEST_F(PackedCastGpuTest, InputBlockIsTheCastAndItsBlockMaximum) {
  size_t exact_blocks = 0;
  for (const auto& values : Layouts(0x4780)) {
    const std::vector<uint32_t> in = Words(values);
    std::vector<uint32_t> half(in.size()), absmax(in.size() / 4);
    ASSERT_OK(RunCastOp(CastOp::kInputBlock, in.data(), half.data(), absmax.data(), in.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(Half(half, i), BFloat16ToHalf(values[i])) << std::hex << values[i];
    }
    for (size_t b = 0; b < values.size() / 32; ++b) {
      uint32_t want = 0;
      bool big = false;
      for (size_t j = 32 * b; j < 32 * b + 32; ++j) {
        want = std::max<uint32_t>(want, BFloat16ToHalf(values[j]) & 0x7FFFu);
        big = big || model::IsNonFiniteHalf(model::Bf16ToFp16Rn(values[j]));
      }
      exact_blocks += big;
      for (size_t a = 4 * b; a < 4 * b + 4; ++a) ASSERT_EQ(absmax[a], want) << "block " << b;
    }
  }
  EXPECT_GT(exact_blocks, 0u);
  EXPECT_LT(exact_blocks, 6u * 65536 / 32);
}

TEST_F(PackedCastGpuTest, RejectsPartialAtomsAndBlocks) {
  std::vector<uint32_t> in(1024), out(1024), absmax(256);
  EXPECT_FALSE(RunCastOp(CastOp::kIn, in.data(), out.data(), nullptr, 6).ok());
  EXPECT_FALSE(RunCastOp(CastOp::kInputBlock, in.data(), out.data(), absmax.data(), 512).ok());
  EXPECT_FALSE(RunCastOp(CastOp::kInputBlock, in.data(), out.data(), nullptr, 1024).ok());
}

}  // namespace
}  // namespace qr::testing
