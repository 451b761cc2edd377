// The packed two-shot values (kernels/packed_two_shot.h) within their proven
// bound on random and adversarial data at world sizes 2, 4 and 8, fp16 and
// bf16 with the cast; the bound nearly reached; the error no larger than
// today's fp32 codecs give on the same data; NaN/inf blocks stay NaN.
#include "kernels/packed_two_shot.h"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/float16.h"
#include "kernels/test_data.h"

namespace qr::kernels::packed {
namespace {

struct Case {
  Codec codec;
  DType dtype;
  int world_size;
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (Codec codec : {Codec::kInt3, Codec::kInt4, Codec::kInt6}) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (int ws : {2, 4, 8}) {
        if (codec == Codec::kInt3 && ws != 2) continue;
        cases.push_back({codec, dtype, ws});
      }
    }
  }
  return cases;
}

// ws ranks of n values: random blocks (the values limited so that no exact
// sum leaves the fp16 range more than the bound allows for), then every
// adversarial block once per rank at a rotating offset.
std::vector<std::vector<uint16_t>> Inputs(DType dtype, int ws, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint16_t>> in(ws, std::vector<uint16_t>(n));
  const double limit = dtype == DType::kFloat16 ? 65504.0 / ws : 1e5 / ws;
  for (auto& r : in) testing::FillRandomBlocks(dtype, rng, limit, r.data(), n);
  const auto adversarial = testing::AdversarialBlocks(dtype);
  for (int r = 0; r < ws; ++r) {
    for (size_t b = 0; b < adversarial.size(); ++b) {
      const int64_t at = static_cast<int64_t>(((b + r) % adversarial.size()) * 32);
      for (int i = 0; i < 32; ++i) in[r][at + i] = adversarial[b][i];
    }
  }
  return in;
}

struct Errors {
  double worst_ratio = 0, sum = 0;
  int64_t over = 0, counted = 0;
};

Errors Measure(const Case& c, const std::vector<std::vector<uint16_t>>& in,
               const std::vector<uint16_t>& out, bool bound) {
  Errors e;
  const int64_t n = static_cast<int64_t>(out.size());
  for (int64_t begin = 0; begin < n; begin += 32) {
    double absmax[8] = {}, element[8];
    bool finite = true;
    for (int r = 0; r < c.world_size; ++r) {
      for (int i = 0; i < 32; ++i) {
        const double v = ToFloat(c.dtype, in[r][begin + i]);
        finite = finite && std::isfinite(v);
        absmax[r] = std::max(absmax[r], std::fabs(v));
      }
    }
    if (!finite) continue;
    for (int i = 0; i < 32; ++i) {
      double exact = 0;
      for (int r = 0; r < c.world_size; ++r) {
        const double v = ToFloat(c.dtype, in[r][begin + i]);
        exact += v;
        element[r] = std::fabs(v);
      }
      const double err = std::fabs(ToFloat(c.dtype, out[begin + i]) - exact);
      e.sum += err;
      ++e.counted;
      if (bound) {
        const double b = TwoShotErrorBound(c.codec, c.dtype, c.world_size, absmax, element, exact);
        if (!(err <= b)) ++e.over;
        if (err > 0) e.worst_ratio = std::max(e.worst_ratio, err / b);
      }
    }
  }
  return e;
}

TEST(PackedTwoShotTest, EveryElementWithinTheBoundAndErrorsLikeTodaysCodecs) {
  for (const Case& c : AllCases()) {
    const int64_t n = c.world_size == 2 ? (1 << 20) : (1 << 18);
    const auto in = Inputs(c.dtype, c.world_size, n, 1800 + c.world_size);
    std::vector<const uint16_t*> ptrs;
    for (const auto& r : in) ptrs.push_back(r.data());
    std::vector<uint16_t> out(n);
    TwoShotValues(c.codec, c.dtype, c.world_size, ptrs.data(), n, out.data());
    const Errors packed = Measure(c, in, out, /*bound=*/true);
    const std::string name = std::string(CodecName(c.codec)) + " " + DTypeName(c.dtype) + " ws" +
                             std::to_string(c.world_size);
    EXPECT_EQ(packed.over, 0) << name;
    EXPECT_GT(packed.worst_ratio, 0.8) << name << ": the bound should be nearly reached";
    // Today's codec (fp32 arithmetic, the same blocks) on uniform data in
    // [-1, 1] (on the data above, bf16's errors are dominated by what the
    // cast to fp16 loses, the same for both).
    std::mt19937_64 rng(18 + c.world_size);
    std::vector<std::vector<uint16_t>> uniform(c.world_size, std::vector<uint16_t>(n));
    std::vector<const uint16_t*> uniform_ptrs;
    for (auto& r : uniform) {
      testing::FillUniform(c.dtype, rng, r.data(), n);
      uniform_ptrs.push_back(r.data());
    }
    std::vector<uint16_t> mine(n);
    TwoShotValues(c.codec, c.dtype, c.world_size, uniform_ptrs.data(), n, mine.data());
    std::vector<uint16_t> today(n);
    testing::Fp32TwoShotValues(c.codec, c.dtype, c.dtype == DType::kBFloat16, c.world_size,
                               uniform_ptrs.data(), n, today.data());
    const double ratio = Measure(c, uniform, mine, /*bound=*/true).sum /
                         Measure(c, uniform, today, /*bound=*/false).sum;
    EXPECT_LT(ratio, 1.02) << name << ": mean error packed / today";
    EXPECT_GT(ratio, 0.98) << name << ": mean error packed / today";
    std::cout << name << ": worst error / bound " << packed.worst_ratio
              << ", mean error packed / today " << ratio << "\n";
  }
}

TEST(PackedTwoShotTest, BlocksHoldingInfOrNaNComeOutNaN) {
  std::vector<uint16_t> a(64, 0x3C00), b(64, 0x4000);
  a[3] = kFp16Inf;
  b[40] = kFp16CanonicalNaN;
  const uint16_t* in[] = {a.data(), b.data()};
  std::vector<uint16_t> out(64);
  TwoShotValues(Codec::kInt4, DType::kFloat16, 2, in, 64, out.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], kFp16CanonicalNaN) << i;
  b[40] = 0x4000;
  TwoShotValues(Codec::kInt4, DType::kFloat16, 2, in, 64, out.data());
  // Without the NaN the second block is finite again: 1 + 2 within the bound.
  const double absmax[] = {1.0, 2.0}, element[] = {1.0, 2.0};
  const double bound = TwoShotErrorBound(Codec::kInt4, DType::kFloat16, 2, absmax, element, 3.0);
  for (int i = 32; i < 64; ++i) EXPECT_LE(std::fabs(HalfToFloat(out[i]) - 3.0), bound) << i;
}

}  // namespace
}  // namespace qr::kernels::packed
