#include <hip/hip_runtime.h>

#include "common/status_macros.h"
#include "kernels/float8.h"
#include "kernels/gpu/fp8_output.cuh"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/gpu_status.h"
#include "tests/gpu/device_words.h"
#include "tests/gpu/fp8_kernels.h"

namespace qr::testing {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 4096;

struct SweepWords {
  unsigned long long mismatches;
  uint32_t first_bits;
};

__global__ void SweepKernel(uint64_t first, uint64_t chunks, SweepWords* out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t c = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += stride) {
    float x[8];
    uint32_t bits[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      bits[e] = static_cast<uint32_t>(first + 8 * c + e);
      x[e] = __uint_as_float(bits[e]);
    }
    const uint2 q = kernels::gpu::E4m3Chunk(x);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const uint32_t got = ((e < 4 ? q.x : q.y) >> (8 * (e % 4))) & 0xFFu;
      if (got != kernels::E4m3FromFloatBits(bits[e])) {
        atomicAdd(&out->mismatches, 1ull);
        atomicMin(&out->first_bits, bits[e]);
      }
    }
  }
}

__global__ void CodesKernel(const uint32_t* bits, size_t chunks, uint2* codes) {
  for (size_t c = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float x[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = __uint_as_float(bits[8 * c + e]);
    codes[c] = kernels::gpu::E4m3Chunk(x);
  }
}

}  // namespace

StatusOr<E4m3Sweep> SweepE4m3Chunk(uint64_t first, uint64_t count) {
  if (count % 8 != 0) return InvalidArgumentError("SweepE4m3Chunk: count must be whole chunks");
  const SweepWords start{0, 0xFFFFFFFFu};
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer words, gpu::DeviceBuffer::Malloc(sizeof(SweepWords)));
  QR_RETURN_IF_ERROR(gpu::Memcpy(words.get(), &start, sizeof(start)));
  hipLaunchKernelGGL(SweepKernel, dim3(kBlocks), dim3(kThreads), 0, 0, first, count / 8,
                     static_cast<SweepWords*>(words.get()));
  QR_GPU_RETURN_IF_ERROR(hipGetLastError());
  QR_GPU_RETURN_IF_ERROR(hipDeviceSynchronize());
  SweepWords got{};
  QR_RETURN_IF_ERROR(gpu::Memcpy(&got, words.get(), sizeof(got)));
  return E4m3Sweep{got.mismatches, got.first_bits};
}

Status E4m3ChunkCodes(const uint32_t* bits, size_t n, uint8_t* codes) {
  if (n % 8 != 0) return InvalidArgumentError("E4m3ChunkCodes: n must be whole chunks");
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer in, UploadWords(bits, n));
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Malloc(n));
  hipLaunchKernelGGL(CodesKernel, dim3(kBlocks), dim3(kThreads), 0, 0,
                     static_cast<const uint32_t*>(in.get()), n / 8, static_cast<uint2*>(out.get()));
  QR_GPU_RETURN_IF_ERROR(hipGetLastError());
  QR_GPU_RETURN_IF_ERROR(hipDeviceSynchronize());
  return gpu::Memcpy(codes, out.get(), n);
}

}  // namespace qr::testing
