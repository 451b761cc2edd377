// Packed fp16x2 arithmetic on raw bits for the packed codecs
// (kernels/packed_codec.h): each operation rounds each half once to nearest
// even, subnormals kept, as IEEE binary16 does (NVIDIA: fma/add/mul.rn.f16x2
// without .ftz; AMD: v_pk_*_f16 with fp16 denormals on, the default). NaN
// results carry unspecified payloads and overflow gives inf: callers keep
// NaN and overflowing blocks off these paths.
#ifndef QR_KERNELS_PLATFORM_HALF2_CUH_
#define QR_KERNELS_PLATFORM_HALF2_CUH_

#include <hip/hip_fp16.h>

#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

QR_DEVICE_INLINE __half2 BitsToHalf2(uint32_t w) {
  __half2 h;
  __builtin_memcpy(&h, &w, sizeof(h));
  return h;
}

QR_DEVICE_INLINE uint32_t Half2ToBits(__half2 h) {
  uint32_t w;
  __builtin_memcpy(&w, &h, sizeof(w));
  return w;
}

// RN16(a * b + c) per half, the product exact.
QR_DEVICE_INLINE uint32_t FmaRnHalf2(uint32_t a, uint32_t b, uint32_t c) {
  return Half2ToBits(__hfma2(BitsToHalf2(a), BitsToHalf2(b), BitsToHalf2(c)));
}

// add and mul with an explicit rounding mode: PTX lets ptxas fuse a mul.f16x2
// and an add.f16x2 without one into an fma (one rounding instead of two),
// which the host reference does not compute.
QR_DEVICE_INLINE uint32_t AddRnHalf2(uint32_t a, uint32_t b) {
#if QR_PLATFORM_CUDA
  uint32_t r;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return Half2ToBits(__hadd2(BitsToHalf2(a), BitsToHalf2(b)));
#endif
}

QR_DEVICE_INLINE uint32_t MulRnHalf2(uint32_t a, uint32_t b) {
#if QR_PLATFORM_CUDA
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return Half2ToBits(__hmul2(BitsToHalf2(a), BitsToHalf2(b)));
#endif
}

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_HALF2_CUH_
