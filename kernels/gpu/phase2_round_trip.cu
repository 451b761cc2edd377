// The phase-2 round trip kernel (phase2_round_trip.h). Thread t holds atom t
// of each of a shard's atom rows (ChunkTiles over a one-chunk buffer), the
// codec's Encode is collective over the warp, and DecodeOut hands each
// thread back exactly the atoms it loaded, so in place is safe: no thread
// writes a value another thread reads.
#include <hip/hip_runtime.h>

#include <string>

#include "common/status_macros.h"
#include "kernels/collective_layout.h"
#include "kernels/gpu/codecs.cuh"
#include "kernels/gpu/collective_kernels.cuh"
#include "kernels/gpu/phase2_round_trip.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/gpu/two_shot_phases.cuh"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/launch.cuh"

namespace qr::kernels {
namespace gpu {
namespace {

// Tiles beyond this many loop in the blocks; no block waits for another.
constexpr int kMaxGrid = 1024;

template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
__global__ void __launch_bounds__(kTwoShotThreads) RoundTripKernel(KernelParams p) {
  // Before reading the reduce-scatter's output (kernels/platform/launch.cuh).
  platform::WaitForPriorKernels();
  constexpr int kA = kTwoShotAtoms / kWs;
  using C = CodecT<Elem<kElem>::kMathBf16, kA>;
  using T = ChunkTiles<kWs>;
  for (int tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
    Vec16 in[kA];
#pragma unroll
    for (int k = 0; k < kA; ++k) in[k] = LoadInputAtom<T>(p, tile, 0, k);
    const typename C::Wire w = C::template EncodeInput<kElem>(in, threadIdx.x);
    StoreOutputShard<kElem, C, T>(p, tile, 0, w);
  }
}

template <WorkFormat kElem, Codec kCodec, template <bool, int> class CodecT, int kWs>
struct RoundTripKernelOf {
  static KernelFn Get() { return RoundTripKernel<kElem, kCodec, CodecT, kWs>; }
};

// fp16 and bf16 only: the split form keeps the bf16 cast off the round trip.
KernelFn RoundTripKernelFor(WorkFormat format, Codec codec, int world_size) {
  switch (format) {
    case WorkFormat::kFp16:
      return PickFlagFamilyWs<RoundTripKernelOf, WorkFormat::kFp16>(world_size, codec);
    case WorkFormat::kBf16:
      return PickFlagFamilyWs<RoundTripKernelOf, WorkFormat::kBf16>(world_size, codec);
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace gpu

namespace {

StatusOr<gpu::KernelFn> RoundTripKernel(WorkFormat format, Codec codec, int world_size) {
  const gpu::KernelFn fn = gpu::RoundTripKernelFor(format, codec, world_size);
  if (fn == nullptr) {
    return InvalidArgumentError(std::string("phase-2 round trip: no kernel for ") +
                                WorkFormatName(format) + " " + CodecName(codec) +
                                " at world size " + std::to_string(world_size));
  }
  return fn;
}

}  // namespace

Status LoadPhase2RoundTrip(WorkFormat format, Codec codec, int world_size) {
  QR_ASSIGN_OR_RETURN(const gpu::KernelFn fn, RoundTripKernel(format, codec, world_size));
  hipFuncAttributes attrs;  // asking for them loads the kernel
  QR_GPU_RETURN_IF_ERROR(hipFuncGetAttributes(&attrs, reinterpret_cast<const void*>(fn)));
  return OkStatus();
}

Status LaunchPhase2RoundTrip(WorkFormat format, Codec codec, int world_size, void* chunk,
                             size_t count, ::qr::gpu::Stream stream, bool overlap) {
  QR_ASSIGN_OR_RETURN(const gpu::KernelFn fn, RoundTripKernel(format, codec, world_size));
  if (count == 0) return OkStatus();
  if (chunk == nullptr || count % 8 != 0 || reinterpret_cast<uintptr_t>(chunk) % 16 != 0) {
    return InvalidArgumentError("phase-2 round trip: a null or misaligned chunk or a count " +
                                std::to_string(count) + " not a multiple of 8");
  }
  const int64_t tiles = CollectiveTiles(static_cast<int64_t>(count), world_size);
  gpu::KernelParams p{};
  p.in = static_cast<const char*>(chunk);
  p.out = static_cast<char*>(chunk);
  p.bytes = count * 2;
  p.num_tiles = static_cast<int>(tiles);
  const int grid = tiles < gpu::kMaxGrid ? static_cast<int>(tiles) : gpu::kMaxGrid;
  QR_GPU_RETURN_IF_ERROR(platform::LaunchKernel(fn, dim3(grid), dim3(kTwoShotThreads),
                                                static_cast<hipStream_t>(stream), overlap, p));
  return OkStatus();
}

}  // namespace qr::kernels
