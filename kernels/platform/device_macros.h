// Device-code macros and constants that differ between HIP on AMD and HIP on
// NVIDIA. Include from .cu/.cuh files only (it pulls in the HIP runtime).
//
//   QR_DEVICE_INLINE       __device__ __forceinline__ helper
//   QR_HOST_DEVICE_INLINE  callable from both sides
//   QR_PLATFORM_CUDA / QR_PLATFORM_HIP  exactly one is 1
//   kWarpSize              32 on NVIDIA, 64 on CDNA
#ifndef QR_KERNELS_PLATFORM_DEVICE_MACROS_H_
#define QR_KERNELS_PLATFORM_DEVICE_MACROS_H_

#include <hip/hip_runtime.h>

#if defined(__HIP_PLATFORM_NVIDIA__) || defined(__HIP_PLATFORM_NVCC__)
#define QR_PLATFORM_CUDA 1
#define QR_PLATFORM_HIP 0
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#define QR_PLATFORM_CUDA 0
#define QR_PLATFORM_HIP 1
#else
#error "kernels/platform: unknown HIP platform"
#endif

#define QR_DEVICE_INLINE __device__ __forceinline__
#define QR_HOST_DEVICE_INLINE __host__ __device__ __forceinline__

namespace qr::platform {

#if QR_PLATFORM_CUDA
inline constexpr int kWarpSize = 32;
#else
inline constexpr int kWarpSize = 64;
#endif

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_DEVICE_MACROS_H_
