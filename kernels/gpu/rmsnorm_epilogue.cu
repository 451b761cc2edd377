// The epilogue kernel (rmsnorm_epilogue.h). Every fp32 operation goes
// through platform::AddRn / MulRn / DivRn / SqrtRn, rounded on its own as
// the host reference computes it; Pack/Unpack are the conversions the
// all-reduce kernels round with (kernels/float16.h's bits).
#include <hip/hip_runtime.h>

#include <atomic>
#include <string>

#include "common/status_macros.h"
#include "kernels/gpu/fp8_output.cuh"
#include "kernels/gpu/rmsnorm_epilogue.h"
#include "kernels/gpu/rmsnorm_inverse.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/launch.cuh"
#include "kernels/rmsnorm_lanes.h"

namespace qr::kernels {
namespace {

using gpu::Pack;
using gpu::Unpack;
using platform::Vec16;

constexpr int kLanes = kRmsNormLanes;
// Blocks loop over rows beyond this many: enough to fill an H200 twice.
constexpr int kMaxGrid = 1024;

struct EpilogueParams {
  const char* residual;
  const char* weight;
  char* residual_out;
  char* norm_out;
  char* quant_out;           // or nullptr: no FP8 output
  const float* quant_scale;  // with quant_out
  size_t tokens;
  size_t hidden;
  float eps;
};

template <bool kBf16>
__global__ void __launch_bounds__(kLanes) ResidualRmsNormKernel(EpilogueParams p) {
  // Before reading the all-reduce's output (programmatic launch,
  // kernels/platform/launch.cuh).
  platform::WaitForPriorKernels();
  __shared__ float lanes[kLanes];
  const size_t chunks = p.hidden / kRmsNormChunkElems;
  // The FP8 output's scale: loaded now, divided into only before the first
  // norm, so its latency hides behind the row's loads.
  const float scale = p.quant_out != nullptr ? *p.quant_scale : 1.0f;
  for (size_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    const size_t row = t * p.hidden * 2;
    // Lane threadIdx.x: its chunks in increasing order, each value's square
    // added in order (the reference's RmsNormSumOfSquares).
    float part = 0.0f;
    for (size_t c = threadIdx.x; c < chunks; c += kLanes) {
      const size_t off = row + c * 16;
      Vec16 out = platform::LoadInput16(p.norm_out + off);  // the all-reduce's bits
      if (p.residual != nullptr) {
        float a[8], b[8];
        Unpack<kBf16>(out, a);
        Unpack<kBf16>(platform::LoadInput16(p.residual + off), b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] = platform::AddRn(a[e], b[e]);
        out = Pack<kBf16>(a);
      }
      platform::StoreOutput16(p.residual_out + off, out);
      float x[8];
      Unpack<kBf16>(out, x);
#pragma unroll
      for (int e = 0; e < 8; ++e) part = platform::AddRn(part, platform::MulRn(x[e], x[e]));
    }
    lanes[threadIdx.x] = part;
    __syncthreads();
    // The pairwise tree: lane j < s takes lane j + s, s = 128 .. 1.
    for (unsigned s = kLanes / 2; s >= 1; s /= 2) {
      if (threadIdx.x < s)
        lanes[threadIdx.x] = platform::AddRn(lanes[threadIdx.x], lanes[threadIdx.x + s]);
      __syncthreads();
    }
    const float inv = gpu::RmsNormInverseOf(lanes[0], p.hidden, p.eps);
    __syncthreads();  // everyone has read lanes[0] before the next row writes it
    const float inv_scale = p.quant_out != nullptr ? platform::DivRn(1.0f, scale) : 0.0f;
    for (size_t c = threadIdx.x; c < chunks; c += kLanes) {
      const size_t off = row + c * 16;
      float x[8], w[8];
      // This thread stored these values above: its own writes are visible.
      Unpack<kBf16>(platform::LoadInput16(p.residual_out + off), x);
      Unpack<kBf16>(platform::LoadInput16(p.weight + c * 16), w);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = platform::MulRn(platform::MulRn(x[e], inv), w[e]);
      const Vec16 norm = Pack<kBf16>(x);
      platform::StoreOutput16(p.norm_out + off, norm);
      if (p.quant_out != nullptr) gpu::StoreFp8Chunk<kBf16>(p.quant_out + off / 2, norm, inv_scale);
    }
  }
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Devices whose context has both kernels loaded (per process, as the
// runtime loads them per context). Racing first calls both load: harmless.
constexpr int kMaxDevices = 64;
std::atomic<bool> g_loaded[kMaxDevices];

}  // namespace

Status LoadResidualRmsNormEpilogue() {
  int device = 0;
  QR_GPU_RETURN_IF_ERROR(hipGetDevice(&device));
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && g_loaded[device].load(std::memory_order_acquire)) return OkStatus();
  // Asking for a kernel's attributes loads it (and its module).
  hipFuncAttributes attrs;
  QR_GPU_RETURN_IF_ERROR(
      hipFuncGetAttributes(&attrs, reinterpret_cast<const void*>(ResidualRmsNormKernel<false>)));
  QR_GPU_RETURN_IF_ERROR(
      hipFuncGetAttributes(&attrs, reinterpret_cast<const void*>(ResidualRmsNormKernel<true>)));
  if (cached) g_loaded[device].store(true, std::memory_order_release);
  return OkStatus();
}

Status ValidateResidualRmsNorm(const ResidualRmsNormRequest& r) {
  if (r.tokens == 0) return OkStatus();
  if (r.hidden == 0 || r.hidden % kRmsNormChunkElems != 0) {
    return InvalidArgumentError("residual RMSNorm: hidden " + std::to_string(r.hidden) +
                                " is not a positive multiple of 8");
  }
  if (r.dtype != DType::kFloat16 && r.dtype != DType::kBFloat16) {
    return InvalidArgumentError("residual RMSNorm: dtype must be fp16 or bf16");
  }
  if (r.weight == nullptr || r.residual_out == nullptr || r.norm_out == nullptr) {
    return InvalidArgumentError("residual RMSNorm: null pointer argument");
  }
  if (!Aligned(r.weight) || !Aligned(r.residual_out) || !Aligned(r.norm_out) ||
      !Aligned(r.residual) || !Aligned(r.quant_out)) {
    return InvalidArgumentError("residual RMSNorm: a buffer is not 16-byte aligned");
  }
  if ((r.quant_out == nullptr) != (r.quant_scale == nullptr) ||
      reinterpret_cast<uintptr_t>(r.quant_scale) % alignof(float) != 0) {
    return InvalidArgumentError(
        "residual RMSNorm: the FP8 output needs quant_out and a 4-byte aligned scale, or neither");
  }
  return OkStatus();
}

Status LaunchResidualRmsNormEpilogue(const ResidualRmsNormRequest& r, ::qr::gpu::Stream stream,
                                     bool overlap) {
  QR_RETURN_IF_ERROR(ValidateResidualRmsNorm(r));
  if (r.tokens == 0) return OkStatus();
  EpilogueParams p{static_cast<const char*>(r.residual),
                   static_cast<const char*>(r.weight),
                   static_cast<char*>(r.residual_out),
                   static_cast<char*>(r.norm_out),
                   static_cast<char*>(r.quant_out),
                   r.quant_scale,
                   r.tokens,
                   r.hidden,
                   r.eps};
  const int grid = r.tokens < static_cast<size_t>(kMaxGrid) ? static_cast<int>(r.tokens) : kMaxGrid;
  auto* fn =
      r.dtype == DType::kBFloat16 ? ResidualRmsNormKernel<true> : ResidualRmsNormKernel<false>;
  QR_GPU_RETURN_IF_ERROR(platform::LaunchKernel(fn, dim3(grid), dim3(kLanes),
                                                static_cast<hipStream_t>(stream), overlap, p));
  return OkStatus();
}

}  // namespace qr::kernels
