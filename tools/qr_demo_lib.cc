#include "tools/qr_demo_lib.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/float16.h"
#include "kernels/one_shot_reference.h"

namespace qr::demo {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

void FillInput(DType dtype, int rank, uint64_t seed, int64_t n, uint16_t* out) {
  const uint64_t base = Mix(seed ^ (static_cast<uint64_t>(rank) << 56));
  for (int64_t block = 0; block * 32 < n; ++block) {
    const uint64_t hb = Mix(base + static_cast<uint64_t>(block));
    const int exponent = static_cast<int>(hb % 13) - 6;  // 2^-6 .. 2^6
    const bool zero_block = (hb >> 8) % 17 == 0;
    const float scale = std::ldexp(1.0f, exponent);
    const int64_t end = std::min<int64_t>(n, block * 32 + 32);
    for (int64_t i = block * 32; i < end; ++i) {
      const uint64_t h = Mix(hb ^ static_cast<uint64_t>(i));
      float v = 0.0f;
      if (!zero_block && h % 29 != 0) {
        // Uniform in (-1, 1) with 24 random bits.
        v = (static_cast<float>(h >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
      }
      out[i] = kernels::FromFloat(dtype, v);
    }
  }
}

Verdict Verify(const kernels::TwoShotParams& p, uint64_t seed, const uint16_t* output,
               Algorithm algorithm) {
  const size_t n = static_cast<size_t>(p.num_elems);
  std::vector<std::vector<uint16_t>> in(p.world_size, std::vector<uint16_t>(n));
  std::vector<std::vector<uint16_t>> ref(p.world_size, std::vector<uint16_t>(n));
  std::vector<const uint16_t*> in_ptrs;
  std::vector<uint16_t*> ref_ptrs;
  for (int r = 0; r < p.world_size; ++r) {
    FillInput(p.dtype, r, seed, p.num_elems, in[r].data());
    in_ptrs.push_back(in[r].data());
    ref_ptrs.push_back(ref[r].data());
  }
  Verdict v;
  const bool one_shot = algorithm == Algorithm::kOneShot;
  const Status ran = one_shot
                         ? kernels::ReferenceOneShotAllReduce(p, in_ptrs.data(), ref_ptrs.data())
                         : kernels::ReferenceAllReduce(p, in_ptrs.data(), ref_ptrs.data());
  if (!ran.ok()) return v;
  v.bit_identical = std::memcmp(ref[0].data(), output, n * sizeof(uint16_t)) == 0;
  if (!v.bit_identical) {
    for (size_t i = 0; i < n; ++i) {
      if (ref[0][i] != output[i]) {
        v.first_mismatch = static_cast<int64_t>(i);
        break;
      }
    }
  }
  // One-shot never quantizes: its error is the FP bound.
  kernels::TwoShotParams bound_params = p;
  if (one_shot) bound_params.codec = Codec::kFp;
  v.bound = kernels::CheckTwoShotOutput(bound_params, in_ptrs.data(), output);
  return v;
}

std::string Verdict::Describe() const {
  std::string s;
  if (!bit_identical)
    s += fmt::format("differs from the reference at element {}; ", first_mismatch);
  s += fmt::format("{} elements beyond the bound (max error/bound {:f} at element {})",
                   bound.violations, bound.max_ratio, bound.worst_index);
  return s;
}

}  // namespace qr::demo
