#include <hip/hip_runtime.h>

#include "common/status_macros.h"
#include "kernels/gpu/int_wire.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/math.cuh"
#include "kernels/platform/vec.cuh"
#include "tests/gpu/device_words.h"
#include "tests/gpu/packed_cast_kernels.h"

namespace qr::testing {
namespace {

using kernels::gpu::Elem;
using platform::Vec16;
using Cast = Elem<WorkFormat::kBf16Cast>;

constexpr int kThreads = 256;

QR_DEVICE_INLINE Vec16 AtomAt(const uint32_t* p, size_t a) {
  return Vec16{{p[4 * a], p[4 * a + 1], p[4 * a + 2], p[4 * a + 3]}};
}

QR_DEVICE_INLINE void PutAtom(uint32_t* p, size_t a, const Vec16& v) {
  for (int i = 0; i < 4; ++i) p[4 * a + i] = v.w[i];
}

__global__ void CastOpKernel(CastOp op, const uint32_t* in, uint32_t* out, uint32_t* absmax,
                             size_t words) {
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  switch (op) {
    case CastOp::kBf16x2ToFp16x2:
      for (size_t i = first; i < words; i += stride) out[i] = platform::Bf16x2ToFp16x2Rn(in[i]);
      break;
    case CastOp::kFp16x2ToBf16x2:
      for (size_t i = first; i < words; i += stride) out[i] = platform::Fp16x2ToBf16x2Rn(in[i]);
      break;
    case CastOp::kIn:
      for (size_t a = first; a < words / 4; a += stride) PutAtom(out, a, Cast::In(AtomAt(in, a)));
      break;
    case CastOp::kOut:
      for (size_t a = first; a < words / 4; a += stride) PutAtom(out, a, Cast::Out(AtomAt(in, a)));
      break;
    case CastOp::kNonFinite:
      for (size_t a = first; a < words / 4; a += stride) {
        PutAtom(out, a, Vec16{{kernels::gpu::AnyNonFiniteHalf(AtomAt(in, a)) ? 1u : 0u, 0, 0, 0}});
      }
      break;
    case CastOp::kInputBlock: {
      // One atom per thread and every lane present: the grid covers the
      // atoms exactly.
      Vec16 x;
      absmax[first] = kernels::gpu::InputBlock<WorkFormat::kBf16Cast>(AtomAt(in, first), x);
      PutAtom(out, first, x);
      break;
    }
  }
}

}  // namespace

Status RunCastOp(CastOp op, const uint32_t* in, uint32_t* out, uint32_t* absmax, size_t words) {
  const bool per_atom = op != CastOp::kBf16x2ToFp16x2 && op != CastOp::kFp16x2ToBf16x2;
  if (per_atom && words % 4 != 0) return InvalidArgumentError("atom ops take whole atoms");
  const bool collective = op == CastOp::kInputBlock;
  if (collective && (words % (4 * kThreads) != 0 || absmax == nullptr)) {
    return InvalidArgumentError("kInputBlock takes whole blocks of 256 atoms and an absmax array");
  }
  if (words == 0) return OkStatus();
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer din, UploadWords(in, words));
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer dout, UploadWords(nullptr, words));
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer dmax, UploadWords(nullptr, collective ? words / 4 : 1));
  const unsigned grid = collective ? static_cast<unsigned>(words / 4 / kThreads) : 1024u;
  hipLaunchKernelGGL(CastOpKernel, dim3(grid), dim3(kThreads), 0, 0, op, din.as<const uint32_t>(),
                     dout.as<uint32_t>(), dmax.as<uint32_t>(), words);
  QR_GPU_RETURN_IF_ERROR(hipGetLastError());
  QR_RETURN_IF_ERROR(gpu::Memcpy(out, dout.get(), dout.bytes()));
  if (collective) QR_RETURN_IF_ERROR(gpu::Memcpy(absmax, dmax.get(), dmax.bytes()));
  return OkStatus();
}

}  // namespace qr::testing
