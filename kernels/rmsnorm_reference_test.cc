#include "kernels/rmsnorm_reference.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/error_bound.h"
#include "kernels/float16.h"
#include "kernels/float8.h"
#include "kernels/one_shot_reference.h"
#include "kernels/test_data.h"
#include "kernels/two_shot_reference.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;
using Rows = std::vector<std::vector<uint16_t>>;

// The order is the specification: a big square in lane 0 swallows the ones
// added after it there (2^24 + 1 rounds to 2^24), while the other lanes' ones
// reach lane 0 in groups that fp32 still represents. A left fold of the row
// would give 2^24; the exact sum is 2^24 + 4095.
TEST(RmsNormReferenceTest, SumOfSquaresFollowsTheLaneTree) {
  std::vector<float> row(4096, 1.0f);
  row[0] = 4096.0f;
  EXPECT_EQ(RmsNormSumOfSquares(row.data(), 4096), 16777216.0f + 4080.0f);
  // A row shorter than the lanes leaves lanes empty (zero).
  std::vector<float> short_row(16, 2.0f);
  EXPECT_EQ(RmsNormSumOfSquares(short_row.data(), 16), 64.0f);
}

// Correctly rounded division and square root: through double, each rounded
// once more to float, which is exact for both (53 >= 2 * 24 + 2 bits).
TEST(RmsNormReferenceTest, InverseIsCorrectlyRounded) {
  EXPECT_EQ(RmsNormInverse(4.0f * 4096, 4096, 0.0f), 0.5f);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> sums(0.0f, 1e6f);
  for (int i = 0; i < 100000; ++i) {
    const float sum = sums(rng);
    const int64_t hidden = 8 * (1 + static_cast<int64_t>(rng() % 2048));
    const float eps = i % 2 ? 1e-6f : 1e-5f;
    const float mean = static_cast<float>(static_cast<double>(sum) / static_cast<double>(hidden));
    const float root = static_cast<float>(std::sqrt(static_cast<double>(mean + eps)));
    const float expected = static_cast<float>(1.0 / static_cast<double>(root));
    ASSERT_EQ(RmsNormInverse(sum, hidden, eps), expected) << sum << " " << hidden;
  }
}

struct Call {
  DType dtype = DType::kFloat16;
  int64_t tokens = 3, hidden = 64;
  float eps = 1e-6f;
};

Rows Random(DType dtype, int64_t n, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Rows v(count, std::vector<uint16_t>(n));
  for (auto& x : v) testing::FillUniform(dtype, rng, x.data(), n);
  return v;
}

// Runs one rank's epilogue on copies, in the layout `alias` names.
struct Outputs {
  std::vector<uint16_t> residual_out, norm_out;
};
enum class Alias { kNone, kResidualOutIsReduced, kResidualOutIsResidual };
Outputs Epilogue(const Call& c, const std::vector<uint16_t>& reduced,
                 const std::vector<uint16_t>* residual, const std::vector<uint16_t>& weight,
                 Alias alias) {
  std::vector<uint16_t> red = reduced;
  std::vector<uint16_t> res = residual != nullptr ? *residual : std::vector<uint16_t>();
  std::vector<uint16_t> ro(reduced.size(), 0x1234), no(reduced.size(), 0x4321);
  ResidualRmsNormRows rows;
  rows.dtype = c.dtype;
  rows.tokens = c.tokens;
  rows.hidden = c.hidden;
  rows.eps = c.eps;
  rows.reduced = red.data();
  rows.residual = residual != nullptr ? res.data() : nullptr;
  rows.weight = weight.data();
  rows.residual_out = alias == Alias::kResidualOutIsReduced    ? red.data()
                      : alias == Alias::kResidualOutIsResidual ? res.data()
                                                               : ro.data();
  rows.norm_out = no.data();
  ApplyResidualRmsNorm(rows, 0, c.tokens);
  return {std::vector<uint16_t>(rows.residual_out, rows.residual_out + reduced.size()), no};
}

// Residual add, the NULL residual and in-place outputs, checked value by
// value against fp64 arithmetic (the norm within a few roundings of it).
TEST(RmsNormReferenceTest, EpilogueComputesTheDocumentedValues) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    Call c;
    c.dtype = dtype;
    c.tokens = 5;
    c.hidden = 2048 + 64;  // more chunks than lanes
    const int64_t n = c.tokens * c.hidden;
    const Rows data = Random(dtype, n, 2, 11);
    const Rows w = Random(dtype, c.hidden, 1, 12);
    const Outputs plain = Epilogue(c, data[0], &data[1], w[0], Alias::kNone);
    const double rel = dtype == DType::kFloat16 ? 1.0 / 2048 : 1.0 / 256;
    for (int64_t t = 0; t < c.tokens; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < c.hidden; ++i) {
        const int64_t k = t * c.hidden + i;
        const float sum32 = ToFloat(dtype, data[0][k]) + ToFloat(dtype, data[1][k]);
        ASSERT_EQ(plain.residual_out[k], FromFloat(dtype, sum32));
        const double x = ToFloat(dtype, plain.residual_out[k]);
        ss += x * x;
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c.hidden) + c.eps);
      for (int64_t i = 0; i < c.hidden; ++i) {
        const int64_t k = t * c.hidden + i;
        const double want = ToFloat(dtype, plain.residual_out[k]) * inv * ToFloat(dtype, w[0][i]);
        ASSERT_NEAR(ToFloat(dtype, plain.norm_out[k]), want, std::fabs(want) * rel + 1e-7) << k;
      }
    }
    // In place on either input: the same bits.
    for (Alias a : {Alias::kResidualOutIsReduced, Alias::kResidualOutIsResidual}) {
      const Outputs in_place = Epilogue(c, data[0], &data[1], w[0], a);
      EXPECT_EQ(in_place.residual_out, plain.residual_out);
      EXPECT_EQ(in_place.norm_out, plain.norm_out);
    }
    // No residual: residual_out is the reduced bits themselves (-0 stays -0).
    std::vector<uint16_t> reduced = data[0];
    reduced[0] = 0x8000;
    const Outputs none = Epilogue(c, reduced, nullptr, w[0], Alias::kNone);
    EXPECT_EQ(none.residual_out, reduced);
    EXPECT_NE(none.norm_out, plain.norm_out);
  }
}

// eps enters the root: an all-zero row normalizes to 0 with eps > 0 and to
// NaN (0 * inf) with eps == 0; a larger eps shrinks every output.
TEST(RmsNormReferenceTest, EpsEntersTheRoot) {
  Call c;
  c.tokens = 1;
  c.hidden = 16;
  const std::vector<uint16_t> zeros(16, 0), w(16, 0x3C00);
  c.eps = 1e-6f;
  EXPECT_EQ(Epilogue(c, zeros, nullptr, w, Alias::kNone).norm_out, zeros);
  c.eps = 0.0f;
  EXPECT_EQ(Epilogue(c, zeros, nullptr, w, Alias::kNone).norm_out[0], kFp16CanonicalNaN);
  const std::vector<uint16_t> ones(16, 0x3C00);  // 1.0: mean square 1
  c.eps = 0.0f;
  EXPECT_EQ(Epilogue(c, ones, nullptr, w, Alias::kNone).norm_out[0], 0x3C00);
  c.eps = 3.0f;  // 1 / sqrt(4) = 0.5
  EXPECT_EQ(Epilogue(c, ones, nullptr, w, Alias::kNone).norm_out[0], 0x3800);
}

TEST(RmsNormReferenceTest, ShapeIsValidated) {
  TwoShotParams p;
  p.num_elems = 64;
  EXPECT_OK(ValidateResidualRmsNormShape(p, 4, 16));
  EXPECT_OK(ValidateResidualRmsNormShape(p, 1, 64));
  EXPECT_THAT(ValidateResidualRmsNormShape(p, 6, 16), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateResidualRmsNormShape(p, 16, 4), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateResidualRmsNormShape(p, 0, 0), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateResidualRmsNormShape(p, -4, -16), StatusIs(StatusCode::kInvalidArgument));
}

struct Mode {
  DType dtype;
  bool cast;
};

// The whole collective, for every regime, both algorithms, fp16/bf16/cast:
// residual_out is exactly the epilogue of the plain all-reduce's bits; every
// rank holds the same outputs (each its own in-place layout); residual_out is
// within the all-reduce's bound of the exact sum plus the add's roundings.
TEST(RmsNormReferenceTest, CollectiveIsTheAllReduceThenTheEpilogue) {
  for (int ws : {2, 4, 8}) {
    for (Codec codec : kAllCodecs) {
      if (!CodecRunsAtWorldSize(codec, ws)) continue;
      for (Mode m : {Mode{DType::kFloat16, false}, Mode{DType::kBFloat16, false},
                     Mode{DType::kBFloat16, true}}) {
        for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
          SCOPED_TRACE(std::to_string(ws) + " " + CodecName(codec) + " " + DTypeName(m.dtype) +
                       (m.cast ? " cast " : " ") + AlgorithmName(algorithm));
          const int64_t tokens = 7, hidden = 1024 + 8;
          const int64_t n = tokens * hidden;
          TwoShotParams p;
          p.world_size = ws;
          p.codec = codec;
          p.dtype = m.dtype;
          p.cast_bf16_to_fp16 = m.cast;
          p.num_elems = n;
          const Rows in = Random(m.dtype, n, ws, 100 + ws);
          const Rows residual = Random(m.dtype, n, 1, 200);
          const Rows weight = Random(m.dtype, hidden, 1, 300);
          // Rank r's layout: r % 3 == 0 separate outputs, 1 residual_out in
          // place on in, 2 residual_out in place on residual and norm_out on in.
          Rows ins = in, res(ws, residual[0]), ro(ws, std::vector<uint16_t>(n, 0x1111)),
               no(ws, std::vector<uint16_t>(n, 0x2222));
          std::vector<const uint16_t*> in_p, res_p;
          std::vector<uint16_t*> ro_p, no_p;
          for (int r = 0; r < ws; ++r) {
            in_p.push_back(ins[r].data());
            res_p.push_back(res[r].data());
            ro_p.push_back(r % 3 == 1 ? ins[r].data() : r % 3 == 2 ? res[r].data() : ro[r].data());
            no_p.push_back(r % 3 == 2 ? ins[r].data() : no[r].data());
          }
          ASSERT_OK(ReferenceAllReduceResidualRmsNorm(p, algorithm, tokens, hidden, 1e-5f,
                                                      in_p.data(), res_p.data(), weight[0].data(),
                                                      ro_p.data(), no_p.data()));
          // The plain all-reduce of the same call, then the epilogue.
          Rows plain(ws, std::vector<uint16_t>(n));
          std::vector<const uint16_t*> plain_in;
          std::vector<uint16_t*> plain_out;
          for (int r = 0; r < ws; ++r) {
            plain_in.push_back(in[r].data());
            plain_out.push_back(plain[r].data());
          }
          if (algorithm == Algorithm::kOneShot) {
            ASSERT_OK(ReferenceOneShotAllReduce(p, plain_in.data(), plain_out.data()));
          } else {
            ASSERT_OK(ReferenceAllReduce(p, plain_in.data(), plain_out.data()));
          }
          Call c;
          c.dtype = m.dtype;
          c.tokens = tokens;
          c.hidden = hidden;
          c.eps = 1e-5f;
          const Outputs want = Epilogue(c, plain[0], &residual[0], weight[0], Alias::kNone);
          for (int r = 0; r < ws; ++r) {
            ASSERT_EQ(std::vector<uint16_t>(ro_p[r], ro_p[r] + n), want.residual_out) << r;
            ASSERT_EQ(std::vector<uint16_t>(no_p[r], no_p[r] + n), want.norm_out) << r;
          }
          // Bound: the all-reduce's documented bound (one-shot: FP without
          // the cast), plus the fp32 add's and the dtype's rounding.
          TwoShotParams bound_p = p;
          if (algorithm == Algorithm::kOneShot) {
            bound_p.codec = Codec::kFp;
            bound_p.cast_bf16_to_fp16 = false;
          }
          std::vector<double> bounds(n);
          TwoShotErrorBounds(bound_p, plain_in.data(), bounds.data());
          const double rel = m.dtype == DType::kFloat16 ? 1.0 / 2048 : 1.0 / 256;
          const double tiny = m.dtype == DType::kFloat16 ? std::ldexp(1.0, -25) : 1e-38;
          for (int64_t i = 0; i < n; ++i) {
            double exact = ToFloat(m.dtype, residual[0][i]);
            for (int r = 0; r < ws; ++r) exact += ToFloat(m.dtype, in[r][i]);
            const double total_bound =
                bounds[i] + (std::fabs(exact) + bounds[i]) * (rel + std::ldexp(1.0, -23)) + tiny;
            ASSERT_LE(std::fabs(ToFloat(m.dtype, want.residual_out[i]) - exact), total_bound) << i;
          }
        }
      }
    }
  }
}

// The FP8 output quantizes the rounded norm: checked against the definition
// of e4m3 (the nearest of its values, 2^-9 steps below 2^-6, three mantissa
// bits above, ±448 at most) and not against float8.h's bit tricks; the
// collective's norm_out and residual_out are the call's without it.
TEST(RmsNormReferenceTest, Fp8OutputIsTheNearestE4m3OfTheScaledNorm) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (float scale : {1.0f, 0.00390625f, 3.0f}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " scale " + std::to_string(scale));
      const int ws = 2;
      const int64_t tokens = 3, hidden = 512 + 16, n = tokens * hidden;
      TwoShotParams p;
      p.world_size = ws;
      p.dtype = dtype;
      p.num_elems = n;
      const Rows in = Random(dtype, n, ws, 41);
      const Rows residual = Random(dtype, n, 1, 42);
      const Rows weight = Random(dtype, hidden, 1, 43);
      Rows ro(ws, std::vector<uint16_t>(n)), no(ws, std::vector<uint16_t>(n));
      Rows plain_ro = ro, plain_no = no;
      std::vector<std::vector<uint8_t>> q(ws, std::vector<uint8_t>(n, 0x55));
      std::vector<const uint16_t*> in_p, res_p;
      std::vector<uint16_t*> ro_p, no_p, plain_ro_p, plain_no_p;
      std::vector<uint8_t*> q_p;
      for (int r = 0; r < ws; ++r) {
        in_p.push_back(in[r].data());
        res_p.push_back(residual[0].data());
        ro_p.push_back(ro[r].data());
        no_p.push_back(no[r].data());
        plain_ro_p.push_back(plain_ro[r].data());
        plain_no_p.push_back(plain_no[r].data());
        q_p.push_back(q[r].data());
      }
      ASSERT_OK(ReferenceAllReduceResidualRmsNorm(p, Algorithm::kOneShot, tokens, hidden, 1e-5f,
                                                  in_p.data(), res_p.data(), weight[0].data(),
                                                  ro_p.data(), no_p.data(), q_p.data(), scale));
      ASSERT_OK(ReferenceAllReduceResidualRmsNorm(p, Algorithm::kOneShot, tokens, hidden, 1e-5f,
                                                  in_p.data(), res_p.data(), weight[0].data(),
                                                  plain_ro_p.data(), plain_no_p.data()));
      EXPECT_EQ(ro, plain_ro);
      EXPECT_EQ(no, plain_no);
      EXPECT_EQ(q[0], q[1]);
      int saturated = 0, subnormal = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(ToFloat(dtype, no[0][i]) * (1.0f / scale));
        const uint8_t code = q[0][i];
        ASSERT_NE(code & 0x7F, 0x7F) << i;  // no NaN from finite values
        const int e = (code >> 3) & 0xF, m = code & 7;
        const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
        const double got = (code & 0x80) != 0 ? -mag : mag;
        if (std::fabs(x) >= 448) {
          ASSERT_EQ(got, std::copysign(448.0, x)) << i;
          ++saturated;
          continue;
        }
        // Half a step of the binade |x| rounds in (steps of 2^-9 below 2^-6).
        const int binade = std::max(std::ilogb(std::fabs(x) > 0 ? x : 1.0), -6);
        const double half_step = std::ldexp(1.0, binade - 4);
        ASSERT_LE(std::fabs(got - x), half_step) << i << " " << x;
        if (e == 0 && m != 0) ++subnormal;
      }
      // The scales reach both ends of the format.
      if (scale == 0.00390625f) {
        EXPECT_GT(saturated, 0);
      }
      if (scale == 3.0f) {
        EXPECT_GT(subnormal, 0);
      }
    }
  }
}

TEST(RmsNormReferenceTest, CollectiveRefusesABadShape) {
  TwoShotParams p;
  p.num_elems = 64;
  std::vector<uint16_t> a(64), b(64), w(16);
  const uint16_t* in[2] = {a.data(), b.data()};
  const uint16_t* res[2] = {nullptr, nullptr};
  uint16_t* out[2] = {a.data(), b.data()};
  EXPECT_THAT(ReferenceAllReduceResidualRmsNorm(p, Algorithm::kOneShot, 4, 12, 1e-6f, in, res,
                                                w.data(), out, out),
              StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace qr::kernels
