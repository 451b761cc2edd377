// Pins the exact bits of the host reference. The GPU kernels must reproduce
// the reference bit for bit, so any change to these digests changes the wire
// format or the arithmetic spec: it must come with docs/codecs.md and the GPU
// port updated, and be announced. Inputs come from a fixed xorshift generator
// (no std:: distributions, whose outputs are implementation-defined).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/float16.h"
#include "kernels/two_shot_reference.h"

namespace qr::kernels {
namespace {

uint64_t Next(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Finite 16-bit values: a random sign and mantissa, exponents in a band chosen
// per block so that blocks differ in scale, plus some zeros.
std::vector<uint16_t> Inputs(DType dtype, int rank, int64_t n) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (rank + 1) + static_cast<int>(dtype);
  std::vector<uint16_t> v(n);
  int base = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 32 == 0) base = static_cast<int>(Next(s) % 20);
    const uint64_t r = Next(s);
    if (r % 17 == 0) {
      v[i] = 0;
      continue;
    }
    const uint16_t sign = (r >> 8) & 1 ? 0x8000 : 0;
    if (dtype == DType::kFloat16) {
      const uint16_t exp = static_cast<uint16_t>(1 + base + (r >> 16) % 10);  // 1..30
      v[i] = sign | (exp << 10) | ((r >> 32) & 0x3FF);
    } else {
      const uint16_t exp = static_cast<uint16_t>(100 + base + (r >> 16) % 10);
      v[i] = sign | (exp << 7) | ((r >> 32) & 0x7F);
    }
  }
  return v;
}

uint64_t Fnv1a(const uint16_t* p, int64_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int64_t i = 0; i < n; ++i) {
    h = (h ^ (p[i] & 0xFF)) * 0x100000001B3ull;
    h = (h ^ (p[i] >> 8)) * 0x100000001B3ull;
  }
  return h;
}

uint64_t Digest(int ws, Codec codec, DType dtype, bool cast) {
  TwoShotParams p;
  p.world_size = ws;
  p.codec = codec;
  p.dtype = dtype;
  p.cast_bf16_to_fp16 = cast;
  p.num_elems = kTileElems + 4096 + 40;  // a full tile and a partial one
  std::vector<std::vector<uint16_t>> in, out(ws, std::vector<uint16_t>(p.num_elems));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < ws; ++r) in.push_back(Inputs(dtype, r, p.num_elems));
  for (int r = 0; r < ws; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  EXPECT_TRUE(ReferenceAllReduce(p, ins.data(), outs.data()).ok());
  return Fnv1a(out[0].data(), p.num_elems);
}

struct Golden {
  int ws;
  Codec codec;
  DType dtype;
  bool cast;
  uint64_t digest;
};

constexpr Golden kGolden[] = {
#include "kernels/two_shot_golden.inc"
};

TEST(TwoShotGoldenTest, OutputsMatchPinnedDigests) {
  for (const Golden& g : kGolden) {
    const uint64_t d = Digest(g.ws, g.codec, g.dtype, g.cast);
    EXPECT_EQ(d, g.digest) << "ws" << g.ws << " " << CodecName(g.codec) << " " << DTypeName(g.dtype)
                           << (g.cast ? " cast" : "");
  }
}

TEST(TwoShotGoldenTest, ScaleFactorsAreTheNearestFloats) {
  for (Codec c : {Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3}) {
    const long double exact = 1.0L / (CodeBias(c) - 0.5L);
    const float f = ScaleFactor(c);
    const float below = BitsToFloat(FloatBits(f) - 1);
    const float above = BitsToFloat(FloatBits(f) + 1);
    EXPECT_LT(std::fabs(static_cast<long double>(f) - exact),
              std::fabs(static_cast<long double>(below) - exact))
        << CodecName(c);
    EXPECT_LT(std::fabs(static_cast<long double>(f) - exact),
              std::fabs(static_cast<long double>(above) - exact))
        << CodecName(c);
  }
}

}  // namespace
}  // namespace qr::kernels
