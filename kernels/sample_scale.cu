#include "kernels/sample_scale.h"

#include <hip/hip_runtime.h>

#include <string>

namespace qr::kernels {
namespace {

__global__ void ScaleKernel(float* data, size_t n, float factor) {
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

Status HipError(hipError_t e, const char* what) {
  return InternalError(std::string(what) + ": " + hipGetErrorString(e));
}

}  // namespace

int SampleGpuCount() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) return 0;
  return n;
}

Status SampleScaleOnGpu(float* host, size_t n, float factor) {
  if (SampleGpuCount() == 0) return UnavailableError("no GPU is visible to this process");
  if (n == 0) return OkStatus();
  float* dev = nullptr;
  hipError_t e = hipMalloc(&dev, n * sizeof(float));
  if (e != hipSuccess) return HipError(e, "hipMalloc");
  e = hipMemcpy(dev, host, n * sizeof(float), hipMemcpyHostToDevice);
  if (e == hipSuccess) {
    unsigned blocks = static_cast<unsigned>((n + 255) / 256);
    hipLaunchKernelGGL(ScaleKernel, dim3(blocks), dim3(256), 0, nullptr, dev, n, factor);
    e = hipGetLastError();
  }
  if (e == hipSuccess) e = hipMemcpy(host, dev, n * sizeof(float), hipMemcpyDeviceToHost);
  hipError_t free_error = hipFree(dev);
  if (e != hipSuccess) return HipError(e, "sample kernel");
  if (free_error != hipSuccess) return HipError(free_error, "hipFree");
  return OkStatus();
}

}  // namespace qr::kernels
