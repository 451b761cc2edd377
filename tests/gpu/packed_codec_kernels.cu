#include <hip/hip_runtime.h>

#include "common/status_macros.h"
#include "kernels/gpu/packed_codec.cuh"
#include "kernels/gpu/packed_scale.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/math.cuh"
#include "tests/gpu/device_words.h"
#include "tests/gpu/packed_codec_kernels.h"

namespace qr::testing {
namespace {

using kernels::gpu::PackedConstants;

__global__ void PackedOpKernel(PackedOp op, Codec codec, PackedConstants k, const uint32_t* a,
                               const uint32_t* b, const uint32_t* c, uint32_t* out, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    switch (op) {
      case PackedOp::kQuantize:
        out[i] = kernels::gpu::QuantizePair(k, a[i], b[i]);
        break;
      case PackedOp::kDecode:
        out[i] = kernels::gpu::DecodePair(k, a[i], b[i]);
        break;
      case PackedOp::kFusedReduce:
        out[i] = kernels::gpu::FusedReducePair(k, a[i], b[i], c[i]);
        break;
      case PackedOp::kMultiplier:
        out[i] = __float_as_uint(kernels::gpu::PackedScaleOf(codec, a[i]).multiplier);
        break;
      case PackedOp::kScaleWord:
        out[i] = platform::FloatToFp16Bits(kernels::gpu::PackedScaleOf(codec, a[i]).quotient);
        break;
    }
  }
}

}  // namespace

Status RunPackedOp(PackedOp op, int bits, const uint32_t* a, const uint32_t* b, const uint32_t* c,
                   uint32_t* out, size_t n) {
  if (n == 0) return OkStatus();
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer da, UploadWords(a, n));
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer db, UploadWords(b, n));
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer dc, UploadWords(c != nullptr ? c : a, n));
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer dout, UploadWords(nullptr, n));
  const Codec codec = bits == 3 ? Codec::kInt3 : bits == 4 ? Codec::kInt4 : Codec::kInt6;
  hipLaunchKernelGGL(PackedOpKernel, dim3(1024), dim3(256), 0, 0, op, codec,
                     kernels::gpu::PackedConstantsFor(bits), da.as<const uint32_t>(),
                     db.as<const uint32_t>(), dc.as<const uint32_t>(), dout.as<uint32_t>(), n);
  QR_GPU_RETURN_IF_ERROR(hipGetLastError());
  QR_RETURN_IF_ERROR(gpu::Memcpy(out, dout.get(), dout.bytes()));
  return OkStatus();
}

}  // namespace qr::testing
