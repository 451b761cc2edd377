// The FP8 output of the fused all-reduce + RMSNorm on GPUs
// (kernels/rmsnorm_reference.h quant_out, docs/fused.md "FP8 output"): a
// chunk of eight normalized values, already rounded to the dtype, becomes
// eight e4m3 bytes by kernels/float8.h's conversion, the function the host
// reference runs, so the bytes are the host's.
#ifndef QR_KERNELS_GPU_FP8_OUTPUT_CUH_
#define QR_KERNELS_GPU_FP8_OUTPUT_CUH_

#include <cstdint>

#include "kernels/float8.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/device_macros.h"
#include "kernels/platform/fp8.cuh"
#include "kernels/platform/math.cuh"
#include "kernels/platform/vec.cuh"

namespace qr::kernels::gpu {

// 1 / *scale, correctly rounded (Fp8InverseScale). Read when the kernel
// runs: a captured graph sees the scale's value at each replay.
QR_DEVICE_INLINE float Fp8InverseScaleOf(const float* scale) {
  return platform::DivRn(1.0f, *scale);
}

// e4m3 codes of eight fp32 values, byte e of the pair the code of x[e]:
// E4m3FromFloatBits's bytes, by the platform's conversion where it has one
// that rounds the same (platform::kE4m3Convert; tests/gpu/fp8_gpu_test.cc
// checks every fp32 value), else by that function.
QR_DEVICE_INLINE uint2 E4m3Chunk(const float (&x)[8]) {
  if constexpr (platform::kE4m3Convert) {
    return make_uint2(platform::E4m3x4SatRn(x[0], x[1], x[2], x[3]),
                      platform::E4m3x4SatRn(x[4], x[5], x[6], x[7]));
  } else {
    uint32_t word[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      word[e / 4] |= static_cast<uint32_t>(E4m3FromFloatBits(__float_as_uint(x[e])))
                     << (8 * (e % 4));
    }
    return make_uint2(word[0], word[1]);
  }
}

// Stores e4m3(norm[e] * inv_scale) for the chunk's eight values at `quant`
// (8 bytes, 8-byte aligned: a chunk's place in a row of whole chunks).
template <bool kBf16>
QR_DEVICE_INLINE void StoreFp8Chunk(char* quant, const platform::Vec16& norm, float inv_scale) {
  float x[8];
  Unpack<kBf16>(norm, x);
#pragma unroll
  for (int e = 0; e < 8; ++e) x[e] = platform::MulRn(x[e], inv_scale);
  *reinterpret_cast<uint2*>(quant) = E4m3Chunk(x);
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_FP8_OUTPUT_CUH_
