#include "kernels/test_data.h"

#include <algorithm>
#include <cmath>

#include "kernels/codec.h"
#include "kernels/float16.h"

namespace qr::kernels::testing {
namespace {

uint16_t Round(DType dtype, double v, double limit) {
  if (limit > 0) v = std::clamp(v, -limit, limit);
  return FromFloat(dtype, static_cast<float>(v));
}

}  // namespace

void FillRandomBlocks(DType dtype, std::mt19937_64& rng, double limit, uint16_t* out, int64_t n) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> shape_dist(0, 9);
  const bool fp16 = dtype == DType::kFloat16;
  std::uniform_int_distribution<int> exp_dist(fp16 ? -24 : -126, fp16 ? 15 : 126);
  const double max = fp16 ? 65504.0 : 3.3895313892515355e38;
  if (limit <= 0) limit = max;  // finite data only
  for (int64_t b = 0; b < n; b += 32) {
    const int shape = shape_dist(rng);
    const double scale = std::ldexp(1.0, exp_dist(rng));
    for (int j = 0; j < 32; ++j) {
      double v = 0;
      switch (shape) {
        case 0:
        case 1:
        case 2:
          v = uni(rng) * scale;
          break;
        case 3:
        case 4:
          v = normal(rng) * scale;
          break;
        case 5:
          v = (j == 7 ? 1000.0 : uni(rng)) * scale;
          break;  // outlier
        case 6:
          v = (j % 5 == 0 ? uni(rng) : 0.0) * scale;
          break;  // sparse
        case 7:
          v = (j % 2 == 0 ? 1.0 : -1.0) * scale * (1 + uni(rng) / 4);
          break;
        case 8:
          v = (uni(rng) < 0 ? -max : max) * (j % 3 == 0 ? 1.0 : uni(rng));
          break;
        default:
          v = uni(rng) * (fp16 ? 0x1p-14 : 0x1p-126);
          break;  // subnormal
      }
      out[b + j] = Round(dtype, v, limit);
    }
  }
}

void FillUniform(DType dtype, std::mt19937_64& rng, uint16_t* out, int64_t n) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) out[i] = Round(dtype, uni(rng), 0);
}

std::vector<std::vector<uint16_t>> AdversarialBlocks(DType dtype) {
  const bool fp16 = dtype == DType::kFloat16;
  const double max = fp16 ? 65504.0 : 3.3895313892515355e38;
  const double tiny = fp16 ? 0x1p-24 : 0x1p-133;  // smallest subnormal
  std::vector<std::vector<uint16_t>> blocks;
  auto add = [&](auto fn) {
    std::vector<uint16_t> block(32);
    for (int j = 0; j < 32; ++j) block[j] = Round(dtype, fn(j), 0);
    blocks.push_back(block);
  };
  add([](int) { return 0.0; });                    // all zeros
  add([](int j) { return j == 0 ? -0.0 : 0.0; });  // signed zero
  add([&](int j) {
    return j == 13 ? (fp16 ? 60000.0 : 1e30) : 1e-3 * (j - 16);
  });  // huge among tiny
  add([&](int j) { return j == 13 ? -(fp16 ? 60000.0 : 1e30) : 1e-3 * (j - 16); });
  add([](int j) { return 9.9e-5 * std::sin(j + 1.0); });  // max below 1e-4
  add([](int j) { return 1.2e-5 * ((j % 7) - 3); });      // tiny (fp16 cliff zone)
  add([&](int j) { return j % 2 == 0 ? max : -max; });    // ±max alternating
  add([&](int j) { return j < 16 ? max : -max; });
  add([&](int j) { return -max * (j + 1) / 32.0; });
  add([&](int j) { return j == 31 ? -max : max * 0.999; });  // negative extreme
  add([](int j) { return j % 2 == 0 ? 1.0 : -1.0; });        // alternating signs
  add([](int j) { return (j % 2 == 0 ? 1.0 : -1.0) * (j + 1); });
  add([&](int j) { return tiny * (j - 16); });  // subnormals
  add([&](int j) { return fp16 ? 0x1p-14 * (j - 16) / 32.0 : 0x1p-126 * (j - 16) / 32.0; });
  add([&](int j) { return j == 5 ? 1.0 : tiny; });  // subnormals + normal
  add([](int j) { return 1.0 + j * 0x1p-10; });     // constant-ish
  add([](int) { return -3.0; });                    // constant negative
  if (!fp16) {
    add([](int j) { return 0x1p-101 * (j - 16); });         // below 2^-100
    add([](int j) { return 0x1p-100 * (j - 16) / 16.0; });  // straddles 2^-100
    add([](int j) { return 1e38 * std::cos(j); });          // huge bf16
  }
  return blocks;
}

void Fp32TwoShotValues(Codec codec, DType dtype, bool cast, int world_size,
                       const uint16_t* const* inputs, int64_t n, uint16_t* out) {
  const DType work = WorkDType(dtype, cast);
  const bool cast_in = work != dtype;
  // Quantize and decode one block of work values (FP: exact).
  auto round_trip = [&](const uint16_t* x, float* decoded) {
    if (codec == Codec::kFp) {
      for (int j = 0; j < 32; ++j) decoded[j] = ToFloat(work, x[j]);
      return;
    }
    uint8_t codes[32];
    const uint16_t scale = QuantizeBlockFp32(codec, work, x, codes);
    for (int j = 0; j < 32; ++j) decoded[j] = DecodeCodeFp32(codec, work, codes[j], scale);
  };
  for (int64_t begin = 0; begin < n; begin += 32) {
    const int len = static_cast<int>(std::min<int64_t>(32, n - begin));
    float acc[32];
    for (int r = 0; r < world_size; ++r) {
      uint16_t x[32] = {};  // padding: +0
      for (int j = 0; j < len; ++j) {
        const uint16_t v = inputs[r][begin + j];
        x[j] = cast_in ? BFloat16ToHalf(v) : v;
      }
      float decoded[32];
      round_trip(x, decoded);
      for (int j = 0; j < 32; ++j) acc[j] = r == 0 ? decoded[j] : acc[j] + decoded[j];
    }
    uint16_t reduced[32];
    for (int j = 0; j < 32; ++j) reduced[j] = FromFloat(work, acc[j]);
    float result[32];
    round_trip(reduced, result);
    for (int j = 0; j < len; ++j) {
      const uint16_t w = FromFloat(work, result[j]);
      out[begin + j] = cast_in ? HalfToBFloat16(w) : w;
    }
  }
}

}  // namespace qr::kernels::testing
