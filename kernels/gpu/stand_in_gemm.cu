// The stand-in GEMM (stand_in_gemm.h).
#include <hip/hip_runtime.h>

#include <cstdint>

#include "kernels/gpu/stand_in_gemm.h"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/launch.cuh"
#include "kernels/platform/vec.cuh"

namespace qr::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) StandInGemmKernel(char* out, size_t bytes, int rounds) {
  // It writes what the previous kernel (the last layer's all-reduce) may
  // still read.
  platform::WaitForPriorKernels();
  float a = 1.0f + static_cast<float>(threadIdx.x) * 1e-7f;
  const float b = 0.999999f;
  for (int i = 0; i < rounds; ++i) a = a * b + 1e-7f;  // a dependent chain
  platform::AllowDependentsToStart();
  // Never true (a stays near 1): keeps the chain from being optimised away.
  const uint32_t word = a == 12345.0f ? 0u : 0x3C3C3C3Cu;
  const platform::Vec16 v{{word, word, word, word}};
  const size_t atoms = bytes / 16;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < atoms;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    platform::StoreOutput16(out + i * 16, v);
  }
}

}  // namespace

Status LaunchStandInGemm(void* out, size_t bytes, int blocks, int rounds,
                         ::qr::gpu::Stream stream) {
  if (bytes % 16 != 0 || (bytes > 0 && out == nullptr) || blocks <= 0 || rounds <= 0) {
    return InvalidArgumentError("stand-in GEMM: bad arguments");
  }
  hipLaunchKernelGGL(StandInGemmKernel, dim3(blocks), dim3(kThreads), 0,
                     static_cast<hipStream_t>(stream), static_cast<char*>(out), bytes, rounds);
  QR_GPU_RETURN_IF_ERROR(hipGetLastError());
  return OkStatus();
}

}  // namespace qr::kernels
