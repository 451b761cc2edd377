// Input generators and host helpers shared by the GPU tests and qr-bench.
#ifndef QR_TESTS_GPU_TEST_DATA_H_
#define QR_TESTS_GPU_TEST_DATA_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::testing {

// Adversarial mix, block by block (32 values): ordinary values over many
// magnitudes, zero blocks, one huge value among tiny ones, values at the top
// of the range, subnormals, alternating signs, blocks below 1e-4, and rare
// inf/NaN when `specials` is set.
inline std::vector<uint16_t> MakeInput(DType dtype, size_t n, uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  auto enc = [&](float f) { return kernels::FromFloat(dtype, f); };
  const bool fp16 = dtype == DType::kFloat16;
  for (size_t b = 0; b < n; b += 32) {
    const size_t end = b + 32 < n ? b + 32 : n;
    const int mode = static_cast<int>(rng() % 16);
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 21) - 12);
    for (size_t i = b; i < end; ++i) {
      switch (mode) {
        case 10:
          v[i] = (rng() & 1) ? 0x8000 : 0;
          break;
        case 11:
          v[i] = enc(i == b + rng() % (end - b) ? 3000.0f * uni(rng) : 1e-3f * uni(rng));
          break;
        case 12:
          v[i] =
              enc((fp16 ? 65504.0f : 3.0e38f) * (0.9f + 0.1f * uni(rng)) * ((rng() & 1) ? 1 : -1));
          break;
        case 13:
          v[i] = static_cast<uint16_t>((rng() % (fp16 ? 0x3FF : 0x7F)) + 1) |
                 ((rng() & 1) ? 0x8000 : 0);
          break;
        case 14:
          v[i] = enc(((i & 1) ? -1.0f : 1.0f) * scale);
          break;
        case 15:
          v[i] =
              enc(uni(rng) * std::ldexp(1.0f, -14 - static_cast<int>(rng() % (fp16 ? 10 : 100))));
          break;
        default:
          v[i] = enc(uni(rng) * scale);
          break;
      }
      if (specials && rng() % 8192 == 0) {
        const uint16_t inf = kernels::InfBits(dtype);
        v[i] = (rng() & 1) ? static_cast<uint16_t>(inf | 0x8000) : kernels::CanonicalNaN(dtype);
      }
    }
  }
  return v;
}

// Fast uniform data for very large messages.
inline std::vector<uint16_t> MakeUniformInput(DType dtype, size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float f = (static_cast<float>(x >> 40) / 16777216.0f - 0.5f) * 8.0f;
    v[i] = kernels::FromFloat(dtype, f);
  }
  return v;
}

inline kernels::TwoShotParams ReferenceParams(WorkFormat format, Codec codec, int world_size,
                                              size_t count) {
  kernels::TwoShotParams p;
  p.world_size = world_size;
  p.codec = codec;
  p.dtype = WorkFormatDType(format);
  p.cast_bf16_to_fp16 = format == WorkFormat::kBf16Cast;
  p.num_elems = static_cast<int64_t>(count);
  return p;
}

// "" when equal, else where and how they differ.
inline std::string FirstDifference(const std::vector<uint16_t>& got,
                                   const std::vector<uint16_t>& want) {
  if (got.size() != want.size()) return "size differs";
  size_t bad = 0;
  size_t first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      if (first == got.size()) first = i;
      ++bad;
    }
  }
  if (bad == 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%zu of %zu values differ; first at %zu: got 0x%04x want 0x%04x",
                bad, got.size(), first, got[first], want[first]);
  return buf;
}

}  // namespace qr::testing

#endif  // QR_TESTS_GPU_TEST_DATA_H_
