#include "comm/fused_call.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;

constexpr uint64_t kMax = 1 << 20;

// Seven disjoint 16-byte aligned buffers of 4 x 64 values.
struct Buffers {
  Buffers() : storage(7 * 256 + 16) {}
  std::vector<uint16_t> storage;
  uint16_t* at(int i) {
    auto base = reinterpret_cast<uintptr_t>(storage.data());
    base = (base + 15) / 16 * 16;
    return reinterpret_cast<uint16_t*>(base) + i * 256;
  }
};

struct Call {
  const void* in;
  void* norm_out;
  ResidualRmsNormArgs args;
};

Call Disjoint(Buffers& b) { return {b.at(0), b.at(4), {b.at(1), b.at(2), b.at(3), 4, 64, 1e-6f}}; }

Status Check(const Call& c, uint64_t max = kMax) {
  return CheckResidualRmsNormArgs(c.in, c.norm_out, c.args, max);
}

TEST(FusedCallTest, AcceptsDisjointBuffersAndTheAllowedAliases) {
  Buffers b;
  EXPECT_OK(Check(Disjoint(b)));
  Call c = Disjoint(b);
  c.args.residual = nullptr;
  EXPECT_OK(Check(c));
  c = Disjoint(b);
  c.args.residual_out = const_cast<void*>(c.in);
  EXPECT_OK(Check(c));
  c = Disjoint(b);
  c.args.residual_out = const_cast<void*>(c.args.residual);
  EXPECT_OK(Check(c));
  c = Disjoint(b);
  c.norm_out = const_cast<void*>(c.in);
  EXPECT_OK(Check(c));
  // vLLM's layout: the residual updated in place, the norm over the input.
  c.args.residual_out = const_cast<void*>(c.args.residual);
  EXPECT_OK(Check(c));
  c = Disjoint(b);
  c.args.tokens = 0;
  EXPECT_OK(Check(c));
}

TEST(FusedCallTest, RefusesOtherOverlaps) {
  Buffers b;
  const auto invalid = StatusIs(StatusCode::kInvalidArgument);
  Call c = Disjoint(b);
  c.norm_out = c.args.residual_out;  // both outputs on one buffer
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.norm_out = const_cast<void*>(c.args.residual);  // the norm over the residual
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.residual = c.in;  // two inputs on one buffer
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.residual_out = b.at(0) + 8;  // partial overlap with in
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.weight = b.at(4) + 64;  // inside norm_out
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.norm_out = const_cast<void*>(c.in);
  c.args.residual_out = const_cast<void*>(c.in);  // in, residual_out and norm_out
  EXPECT_THAT(Check(c), invalid);
}

TEST(FusedCallTest, RefusesBadShapesPointersAndSizes) {
  Buffers b;
  const auto invalid = StatusIs(StatusCode::kInvalidArgument);
  Call c = Disjoint(b);
  c.args.hidden = 60;  // 120-byte rows
  c.args.tokens = 4;
  EXPECT_THAT(Check(c), invalid);
  c.args.hidden = 0;
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.weight = nullptr;
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.in = nullptr;
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.residual_out = nullptr;
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.norm_out = nullptr;
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.residual = b.at(1) + 1;  // 2-byte aligned
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  c.args.weight = b.at(2) + 4;  // 8-byte aligned
  EXPECT_THAT(Check(c), invalid);
  c = Disjoint(b);
  EXPECT_THAT(Check(c, 4 * 64 * 2 - 16), invalid);  // above the maximum
  EXPECT_OK(Check(c, 4 * 64 * 2));
  c.args.tokens = SIZE_MAX / 8;  // overflows
  EXPECT_THAT(Check(c, UINT64_MAX), invalid);
}

// The FP8 output: quant_out (256 bytes here) and the scale both or neither,
// aligned, and apart from every buffer; vLLM's in-place layout with it.
TEST(FusedCallTest, ChecksTheFp8Output) {
  Buffers b;
  auto with_fp8 = [&](Call c) {
    c.args.quant_out = b.at(5);
    c.args.quant_scale = reinterpret_cast<const float*>(b.at(6));
    return c;
  };
  EXPECT_OK(Check(with_fp8(Disjoint(b))));
  Call c = with_fp8(Disjoint(b));
  c.norm_out = const_cast<void*>(c.in);
  c.args.residual_out = const_cast<void*>(c.args.residual);
  EXPECT_OK(Check(c));
  // The scale needs only a float's alignment.
  c = with_fp8(Disjoint(b));
  c.args.quant_scale = reinterpret_cast<const float*>(b.at(6) + 2);
  EXPECT_OK(Check(c));
  const auto invalid = StatusIs(StatusCode::kInvalidArgument);
  c = with_fp8(Disjoint(b));
  c.args.quant_scale = nullptr;
  EXPECT_THAT(Check(c), invalid);
  c = with_fp8(Disjoint(b));
  c.args.quant_out = nullptr;
  EXPECT_THAT(Check(c), invalid);
  c = with_fp8(Disjoint(b));
  c.args.quant_out = reinterpret_cast<char*>(b.at(5)) + 8;
  EXPECT_THAT(Check(c), invalid);  // not 16-byte aligned
  c = with_fp8(Disjoint(b));
  c.args.quant_scale = reinterpret_cast<const float*>(reinterpret_cast<const char*>(b.at(6)) + 2);
  EXPECT_THAT(Check(c), invalid);  // not 4-byte aligned
  // quant_out is 256 bytes: the second half of norm_out's 512 overlaps it.
  c = with_fp8(Disjoint(b));
  c.args.quant_out = b.at(4) + 128;
  EXPECT_THAT(Check(c), invalid);
  c = with_fp8(Disjoint(b));
  c.args.quant_out = const_cast<void*>(c.in);
  EXPECT_THAT(Check(c), invalid);
  // The scale inside an input or an output.
  for (int i : {0, 1, 2, 3, 4, 5}) {
    c = with_fp8(Disjoint(b));
    c.args.quant_scale = reinterpret_cast<const float*>(b.at(i) + 8);
    EXPECT_THAT(Check(c), invalid) << i;
  }
  // Just past quant_out's 256 bytes is apart from it.
  c = with_fp8(Disjoint(b));
  c.args.quant_scale = reinterpret_cast<const float*>(b.at(5) + 128);
  EXPECT_OK(Check(c));
}

}  // namespace
}  // namespace qr
