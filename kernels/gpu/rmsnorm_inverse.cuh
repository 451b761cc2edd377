// The RMSNorm inverse of a row from its sum of squares, as the host
// reference computes it (kernels/rmsnorm_reference.cc RmsNormInverse):
// correctly rounded division, square root and division, never an rsqrt
// approximation. Shared by the fused kernel and the epilogue kernel.
#ifndef QR_KERNELS_GPU_RMSNORM_INVERSE_CUH_
#define QR_KERNELS_GPU_RMSNORM_INVERSE_CUH_

#include <cstddef>

#include "kernels/platform/device_macros.h"
#include "kernels/platform/math.cuh"

namespace qr::kernels::gpu {

// 1 / sqrt(sum_of_squares / hidden + eps). When hidden is a power of two
// (4096, 8192: the common rows) the mean is a product by 2^-k instead of a
// division: both are the correctly rounded value of the same real number,
// so the bits agree (subnormals, infinities and NaNs included), and the
// IEEE division is a dependent chain of some twenty instructions on the
// row's critical path. 2^-k's bits are 2^k's with the exponent 127 + k
// made 127 - k.
QR_DEVICE_INLINE float RmsNormInverseOf(float sum_of_squares, size_t hidden, float eps) {
  const float h = static_cast<float>(hidden);  // round to nearest, as the host
  const float mean =
      (hidden & (hidden - 1)) == 0
          ? platform::MulRn(sum_of_squares, __uint_as_float(0x7F000000u - __float_as_uint(h)))
          : platform::DivRn(sum_of_squares, h);
  return platform::DivRn(1.0f, platform::SqrtRn(platform::AddRn(mean, eps)));
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_RMSNORM_INVERSE_CUH_
