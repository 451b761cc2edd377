// Turns HIP runtime errors into qr::Status inside .cu files:
//   QR_GPU_RETURN_IF_ERROR(hipMalloc(&p, n));
// becomes kInternal "hipMalloc(&p, n) at file:line: <runtime message>".
#ifndef QR_KERNELS_PLATFORM_GPU_STATUS_H_
#define QR_KERNELS_PLATFORM_GPU_STATUS_H_

#include <hip/hip_runtime.h>

#include <string>

#include "common/status.h"

namespace qr::platform {

inline Status GpuErrorToStatus(hipError_t e, const char* call, const char* file, int line) {
  if (e == hipSuccess) return OkStatus();
  return InternalError(std::string(call) + " at " + file + ":" + std::to_string(line) + ": " +
                       hipGetErrorString(e));
}

}  // namespace qr::platform

#define QR_GPU_RETURN_IF_ERROR(call)                                                     \
  do {                                                                                   \
    hipError_t qr_gpu_error_ = (call);                                                   \
    if (qr_gpu_error_ != hipSuccess)                                                     \
      return ::qr::platform::GpuErrorToStatus(qr_gpu_error_, #call, __FILE__, __LINE__); \
  } while (0)

#endif  // QR_KERNELS_PLATFORM_GPU_STATUS_H_
