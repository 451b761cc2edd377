// The row-split form's conditions (kernels/fused_split.h) and its proof:
// built from the reference's steps, it gives the two-shot fused
// collective's bits wherever SplitRowsExact holds (every world size,
// format, codec, in place or not) and differs from them in the excluded
// cases the file comment names, so the conditions are needed as well.
#include "kernels/fused_split_reference.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/float16.h"
#include "kernels/fused_split.h"
#include "kernels/rmsnorm_reference.h"
#include "kernels/test_data.h"
#include "tests/util/status_matchers.h"

namespace qr::kernels {
namespace {

using ::qr::testing::StatusIs;

static_assert(SplitRowsExact(WorkFormat::kBf16Cast, Codec::kFp, 8, 8, 8));
static_assert(!SplitRowsExact(WorkFormat::kFp16, Codec::kFp, 7, 4096, 2));
static_assert(SplitRowsExact(WorkFormat::kBf16, Codec::kInt4, 8, 32, 8));
static_assert(!SplitRowsExact(WorkFormat::kBf16, Codec::kInt4, 8, 8, 4));  // 16 values per rank
static_assert(!SplitRowsExact(WorkFormat::kBf16Cast, Codec::kInt8, 8, 4096, 2));

TEST(FusedSplitTest, ConditionsAndRowMapping) {
  EXPECT_TRUE(SplitRowsExact(WorkFormat::kFp16, Codec::kFp, 2, 8, 2));
  EXPECT_FALSE(SplitRowsExact(WorkFormat::kFp16, Codec::kFp, 0, 8, 2));
  EXPECT_FALSE(SplitRowsExact(WorkFormat::kFp16, Codec::kFp, 6, 8, 4));
  // Integer codecs: whole blocks of 32 per rank, any hidden that gives them.
  EXPECT_TRUE(SplitRowsExact(WorkFormat::kFp16, Codec::kInt3, 8, 8, 2));   // 32 per rank
  EXPECT_FALSE(SplitRowsExact(WorkFormat::kFp16, Codec::kInt3, 4, 8, 2));  // 16
  EXPECT_TRUE(SplitRowsExact(WorkFormat::kFp16, Codec::kInt6, 16, 1032, 4));
  EXPECT_FALSE(SplitRowsExact(WorkFormat::kFp16, Codec::kInt6, 8, 1032, 4));  // 2 x 1032
  EXPECT_FALSE(SplitRowsExact(WorkFormat::kBf16Cast, Codec::kInt4, 16, 4096, 2));
  EXPECT_TRUE(SplitRowsExact(WorkFormat::kBf16Cast, Codec::kFp, 16, 4096, 2));
  EXPECT_FALSE(SplitRowsRoundTrip(Codec::kFp));
  EXPECT_TRUE(SplitRowsRoundTrip(Codec::kInt8));
  // 12 rows over 4 ranks: rank 2 has rows 6..8, values 6 * 24 ..
  EXPECT_EQ(SplitRowsPerRank(12, 4), 3);
  EXPECT_EQ(SplitFirstRow(12, 4, 2), 6);
  EXPECT_EQ(SplitChunkElems(12, 24, 4), 72);
  EXPECT_EQ(SplitRowsOffsetBytes(12, 24, 4, 2), 6 * 24 * 2);
  EXPECT_EQ(SplitRowsOffsetBytes(12, 24, 4, 0), 0);
}

using Rows = std::vector<std::vector<uint16_t>>;

// residual_out / norm_out placement (docs/fused.md's aliasing rules).
enum class Layout { kSeparate, kInPlace, kResidualOutIsIn, kNoResidual };

struct Result {
  Rows residual_out, norm_out;
};

// Runs the split form (split) or the two-shot reference on copies of the
// data in `layout`; ok() false on an error status.
Status RunForm(bool split, const TwoShotParams& p, int64_t tokens, int64_t hidden, Layout layout,
               const Rows& inputs, const Rows& residual, const std::vector<uint16_t>& weight,
               Result* out) {
  const int ws = p.world_size;
  const size_t n = inputs[0].size();
  Rows in = inputs, res = residual, ro(ws, std::vector<uint16_t>(n, 0x5A5A)),
       no(ws, std::vector<uint16_t>(n, 0xA5A5));
  std::vector<const uint16_t*> ins, ress;
  std::vector<uint16_t*> ros, nos;
  for (int r = 0; r < ws; ++r) {
    ins.push_back(in[r].data());
    ress.push_back(layout == Layout::kNoResidual ? nullptr : res[r].data());
    ros.push_back(layout == Layout::kInPlace           ? res[r].data()
                  : layout == Layout::kResidualOutIsIn ? in[r].data()
                                                       : ro[r].data());
    nos.push_back(layout == Layout::kInPlace ? in[r].data() : no[r].data());
  }
  const float eps = 1e-6f;
  const Status s =
      split ? ReferenceSplitResidualRmsNorm(p, tokens, hidden, eps, ins.data(), ress.data(),
                                            weight.data(), ros.data(), nos.data())
            : ReferenceAllReduceResidualRmsNorm(p, Algorithm::kTwoShot, tokens, hidden, eps,
                                                ins.data(), ress.data(), weight.data(), ros.data(),
                                                nos.data());
  out->residual_out.clear();
  out->norm_out.clear();
  for (int r = 0; r < ws; ++r) {
    out->residual_out.emplace_back(ros[r], ros[r] + n);
    out->norm_out.emplace_back(nos[r], nos[r] + n);
  }
  return s;
}

WorkFormat FormatOf(const TwoShotParams& p) {
  if (p.dtype == DType::kFloat16) return WorkFormat::kFp16;
  return p.cast_bf16_to_fp16 ? WorkFormat::kBf16Cast : WorkFormat::kBf16;
}

TEST(FusedSplitTest, GivesTheTwoShotBitsExactlyWhereTheConditionsHold) {
  // Rows of 1056 (33 blocks) split into whole blocks at every world size;
  // rows of 1032 only 4 at a time; 8 x 8 only at world size 2. 24 rows of
  // 1056 at world size 2 are 12672 values per rank: more than one
  // collective tile, the last one partial.
  const int64_t shapes[][2] = {{24, 1056}, {24, 1032}, {8, 8}, {16, 2048}, {8, 4096}};
  const DType dtypes[] = {DType::kFloat16, DType::kBFloat16, DType::kBFloat16};
  int exact = 0, differing = 0, case_index = 0;
  for (int ws : {2, 4, 8}) {
    for (int f = 0; f < 3; ++f) {
      for (Codec codec : kAllCodecs) {
        if (!CodecRunsAtWorldSize(codec, ws)) continue;
        for (const auto& shape : shapes) {
          const int64_t tokens = shape[0], hidden = shape[1], n = tokens * hidden;
          TwoShotParams p;
          p.world_size = ws;
          p.codec = codec;
          p.dtype = dtypes[f];
          p.cast_bf16_to_fp16 = f == 2;
          p.num_elems = n;
          const uint64_t seed = static_cast<uint64_t>(++case_index);
          std::mt19937_64 rng(seed);
          Rows in(ws, std::vector<uint16_t>(n)), res(ws);
          // Wide magnitudes per block (FillRandomBlocks), kept below the
          // range so that sums stay finite.
          const double limit =
              WorkDType(p.dtype, p.cast_bf16_to_fp16) == DType::kFloat16 ? 60000.0 / ws : 1e30;
          for (auto& v : in) testing::FillRandomBlocks(p.dtype, rng, limit, v.data(), n);
          std::vector<uint16_t> residual(n), weight(hidden);
          testing::FillUniform(p.dtype, rng, residual.data(), n);
          testing::FillUniform(p.dtype, rng, weight.data(), hidden);
          for (auto& v : res) v = residual;
          const Layout layout = static_cast<Layout>(case_index % 4);
          const std::string what = "ws " + std::to_string(ws) + " " + WorkFormatName(FormatOf(p)) +
                                   " " + CodecName(codec) + " " + std::to_string(tokens) + "x" +
                                   std::to_string(hidden) + " layout " +
                                   std::to_string(case_index % 4);
          SCOPED_TRACE(what);
          Result split, want;
          ASSERT_OK(RunForm(false, p, tokens, hidden, layout, in, res, weight, &want));
          if (tokens % ws != 0) {
            EXPECT_THAT(RunForm(true, p, tokens, hidden, layout, in, res, weight, &split),
                        StatusIs(StatusCode::kInvalidArgument));
            continue;
          }
          ASSERT_OK(RunForm(true, p, tokens, hidden, layout, in, res, weight, &split));
          const bool same =
              split.residual_out == want.residual_out && split.norm_out == want.norm_out;
          if (SplitRowsExact(FormatOf(p), codec, tokens, hidden, ws)) {
            ++exact;
            for (int r = 0; r < ws; ++r) {
              ASSERT_EQ(split.residual_out[r], want.residual_out[r]) << "rank " << r;
              ASSERT_EQ(split.norm_out[r], want.norm_out[r]) << "rank " << r;
            }
          } else {
            // Misaligned blocks, or the cast's lost bits: the conditions
            // are not merely sufficient here. (A message of 64 values may
            // happen to quantize alike both ways.)
            if (n < 1024) continue;
            ++differing;
            EXPECT_FALSE(same) << "the split form matched outside its conditions";
          }
        }
      }
    }
  }
  EXPECT_GT(exact, 100);
  EXPECT_GT(differing, 10);
}

// The round trip copies FP values and quantizes integer codecs' (uniform
// data does not survive 8 bits or fewer per value unchanged).
TEST(FusedSplitTest, RoundTripChunk) {
  for (Codec codec : {Codec::kFp, Codec::kInt8, Codec::kInt4}) {
    TwoShotParams p;
    p.world_size = 4;
    p.codec = codec;
    p.num_elems = 4096 + 64;
    std::mt19937_64 rng(5);
    std::vector<uint16_t> v(static_cast<size_t>(p.num_elems));
    testing::FillUniform(p.dtype, rng, v.data(), p.num_elems);
    std::vector<uint16_t> once = v;
    RoundTripChunk(p, once.data());
    EXPECT_EQ(once == v, codec == Codec::kFp) << CodecName(codec);
  }
}

}  // namespace
}  // namespace qr::kernels
