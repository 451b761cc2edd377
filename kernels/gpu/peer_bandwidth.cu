#include <hip/hip_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/vec.cuh"

namespace qr::kernels {
namespace {

struct PeerStoreParams {
  char* dst[kPeerStoreMaxDsts];
  int num_dst;
  size_t vecs_per_dst;
};
static_assert(std::is_trivially_copyable_v<PeerStoreParams>, "kernel parameter");

// Block b writes destination b % num_dst together with the other blocks of
// that residue; values come from registers so that only the stores (the link)
// are measured, not loads.
__global__ void __launch_bounds__(kPeerStoreThreads) PeerStoreKernel(PeerStoreParams p) {
  const int d = blockIdx.x % p.num_dst;
  const size_t lane = static_cast<size_t>(blockIdx.x / p.num_dst) * blockDim.x + threadIdx.x;
  const size_t blocks_for_d = (gridDim.x - d + p.num_dst - 1) / p.num_dst;
  const size_t stride = blocks_for_d * blockDim.x;
  char* dst = p.dst[d];
  for (size_t i = lane; i < p.vecs_per_dst; i += stride) {
    const uint32_t x = static_cast<uint32_t>(i);
    platform::StoreRemote16(dst + i * 16, platform::Vec16{{x, x + 1, x + 2, x + 3}});
  }
}

}  // namespace

Status LaunchPeerStore(const PeerStoreArgs& args) {
  if (args.num_dst < 1 || args.num_dst > kPeerStoreMaxDsts) {
    return InvalidArgumentError("peer store: num_dst " + std::to_string(args.num_dst) +
                                " is not in 1.." + std::to_string(kPeerStoreMaxDsts));
  }
  if (args.bytes_per_dst == 0 || args.bytes_per_dst % 16 != 0) {
    return InvalidArgumentError("peer store: bytes_per_dst " + std::to_string(args.bytes_per_dst) +
                                " is not a positive multiple of 16");
  }
  if (args.blocks < args.num_dst) {
    return InvalidArgumentError("peer store: " + std::to_string(args.blocks) +
                                " blocks cannot cover " + std::to_string(args.num_dst) +
                                " destinations");
  }
  PeerStoreParams p{};
  for (int i = 0; i < args.num_dst; ++i) {
    if (args.dst[i] == nullptr || reinterpret_cast<uintptr_t>(args.dst[i]) % 16 != 0) {
      return InvalidArgumentError("peer store: destination " + std::to_string(i) +
                                  " is null or not 16-byte aligned");
    }
    p.dst[i] = static_cast<char*>(args.dst[i]);
  }
  p.num_dst = args.num_dst;
  p.vecs_per_dst = args.bytes_per_dst / 16;
  hipLaunchKernelGGL(PeerStoreKernel, dim3(args.blocks), dim3(kPeerStoreThreads), 0,
                     static_cast<hipStream_t>(args.stream), p);
  QR_GPU_RETURN_IF_ERROR(hipGetLastError());
  return OkStatus();
}

StatusOr<std::string> GpuDeviceName(int device) {
  hipDeviceProp_t prop;
  QR_GPU_RETURN_IF_ERROR(hipGetDeviceProperties(&prop, device));
  return std::string(prop.name);
}

StatusOr<std::string> GpuDriverAndRuntimeVersions() {
  int driver = 0;
  int runtime = 0;
  QR_GPU_RETURN_IF_ERROR(hipDriverGetVersion(&driver));
  QR_GPU_RETURN_IF_ERROR(hipRuntimeGetVersion(&runtime));
  return "driver " + std::to_string(driver) + ", runtime " + std::to_string(runtime);
}

}  // namespace qr::kernels
