// QR_HOST_DEVICE: marks a function that both g++ (host tests, the host
// reference) and the GPU compilers compile, so that a host test checks the
// very code the device runs. Plain header: no HIP include, so g++ reads it.
#ifndef QR_KERNELS_PLATFORM_HOST_DEVICE_H_
#define QR_KERNELS_PLATFORM_HOST_DEVICE_H_

#if defined(__CUDACC__) || defined(__HIP__)
#define QR_HOST_DEVICE __host__ __device__
#else
#define QR_HOST_DEVICE
#endif

#endif  // QR_KERNELS_PLATFORM_HOST_DEVICE_H_
