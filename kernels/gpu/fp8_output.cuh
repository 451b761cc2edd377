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
#include "kernels/platform/math.cuh"
#include "kernels/platform/vec.cuh"

namespace qr::kernels::gpu {

// 1 / *scale, correctly rounded (Fp8InverseScale). Read when the kernel
// runs: a captured graph sees the scale's value at each replay.
QR_DEVICE_INLINE float Fp8InverseScaleOf(const float* scale) {
  return platform::DivRn(1.0f, *scale);
}

// Stores e4m3(norm[e] * inv_scale) for the chunk's eight values at `quant`
// (8 bytes, 8-byte aligned: a chunk's place in a row of whole chunks).
template <bool kBf16>
QR_DEVICE_INLINE void StoreFp8Chunk(char* quant, const platform::Vec16& norm, float inv_scale) {
  float x[8];
  Unpack<kBf16>(norm, x);
  uint32_t word[2] = {0, 0};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const uint32_t q = E4m3FromFloatBits(__float_as_uint(platform::MulRn(x[e], inv_scale)));
    word[e / 4] |= q << (8 * (e % 4));
  }
  *reinterpret_cast<uint2*>(quant) = make_uint2(word[0], word[1]);
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_FP8_OUTPUT_CUH_
