#include <hip/hip_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/status_macros.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/platform/bulk_copy.cuh"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/vec.cuh"

namespace qr::kernels {
namespace {

struct PeerStoreParams {
  char* dst[kPeerStoreMaxDsts];
  int num_dst;
  size_t vecs_per_dst;
  uint32_t chunk_vecs;  // kTmaBulk: 16-byte vectors per bulk copy
};
static_assert(std::is_trivially_copyable_v<PeerStoreParams>, "kernel parameter");

QR_DEVICE_INLINE platform::Vec16 PatternVec(size_t i) {
  return platform::Vec16{{PeerStorePatternWord(i, 0), PeerStorePatternWord(i, 1),
                          PeerStorePatternWord(i, 2), PeerStorePatternWord(i, 3)}};
}

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
    platform::StoreRemote16(dst + i * 16, PatternVec(i));
  }
}

// The same bytes by bulk copies: destination d's chunks (chunk_vecs vectors,
// the last one shorter) go round-robin to the blocks of residue d. Two
// shared buffers alternate, so that the block fills chunk k+1 from
// registers while the copy engine still reads chunk k. Thread 0 issues
// and waits for every copy (bulk groups are per thread).
__global__ void __launch_bounds__(kPeerStoreThreads) PeerStoreBulkKernel(PeerStoreParams p) {
  extern __shared__ platform::Vec16 bulk_buffers[];  // [2][chunk_vecs]
  const int d = blockIdx.x % p.num_dst;
  const size_t first = blockIdx.x / p.num_dst;
  const size_t blocks_for_d = (gridDim.x - d + p.num_dst - 1) / p.num_dst;
  char* dst = p.dst[d];
  const size_t chunks = (p.vecs_per_dst + p.chunk_vecs - 1) / p.chunk_vecs;
  const bool issuer = threadIdx.x == 0;
  int slot = 0;
  for (size_t c = first; c < chunks; c += blocks_for_d, slot ^= 1) {
    platform::Vec16* buf = bulk_buffers + static_cast<size_t>(slot) * p.chunk_vecs;
    // This slot was last copied two chunks ago: with at most one group (the
    // previous chunk's, from the other slot) still reading, that copy is done
    // with it. The barrier passes that on to every thread.
    if (issuer) platform::BulkWaitGroupRead<1>();
    __syncthreads();
    const size_t v0 = c * p.chunk_vecs;
    const size_t left = p.vecs_per_dst - v0;
    const uint32_t n = left < p.chunk_vecs ? static_cast<uint32_t>(left) : p.chunk_vecs;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) buf[j] = PatternVec(v0 + j);
    // Every thread's shared stores, made visible to the copy engine, and the
    // barrier orders them all before the issuing thread's copy.
    platform::FenceSharedForBulkCopy();
    __syncthreads();
    if (issuer) {
      platform::BulkCopySharedToGlobal(dst + v0 * 16, buf, n * 16);
      platform::BulkCommitGroup();
    }
  }
  // The copies read this block's shared memory, which ends with the block,
  // and a finished kernel is to mean written bytes (as for the SM stores).
  if (issuer) platform::BulkWaitGroup<0>();
}

}  // namespace

const char* PeerStoreMethodName(PeerStoreMethod method) {
  switch (method) {
    case PeerStoreMethod::kSmStores:
      return "sm";
    case PeerStoreMethod::kTmaBulk:
      return "tma";
  }
  return "?";
}

bool PeerStoreMethodAvailable(PeerStoreMethod method) {
  switch (method) {
    case PeerStoreMethod::kSmStores:
      return true;
    case PeerStoreMethod::kTmaBulk:
      return platform::kBulkCopyAvailable;
  }
  return false;
}

Status ValidatePeerStoreArgs(const PeerStoreArgs& args) {
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
  for (int i = 0; i < args.num_dst; ++i) {
    if (args.dst[i] == nullptr || reinterpret_cast<uintptr_t>(args.dst[i]) % 16 != 0) {
      return InvalidArgumentError("peer store: destination " + std::to_string(i) +
                                  " is null or not 16-byte aligned");
    }
  }
  if (args.method != PeerStoreMethod::kSmStores && args.method != PeerStoreMethod::kTmaBulk) {
    return InvalidArgumentError("peer store: method " +
                                std::to_string(static_cast<int>(args.method)) +
                                " is not kSmStores or kTmaBulk");
  }
  if (args.method == PeerStoreMethod::kTmaBulk) {
    if (args.chunk_bytes < kPeerStoreMinChunkBytes || args.chunk_bytes > kPeerStoreMaxChunkBytes ||
        args.chunk_bytes % platform::kBulkCopyAlign != 0) {
      return InvalidArgumentError("peer store: chunk_bytes " + std::to_string(args.chunk_bytes) +
                                  " is not a multiple of 16 in " +
                                  std::to_string(kPeerStoreMinChunkBytes) + ".." +
                                  std::to_string(kPeerStoreMaxChunkBytes));
    }
    if (!PeerStoreMethodAvailable(args.method)) {
      return UnsupportedError(
          "peer store: TMA bulk copies (kTmaBulk) exist on NVIDIA sm_90 only, not on this "
          "platform");
    }
  }
  return OkStatus();
}

Status LaunchPeerStore(const PeerStoreArgs& args) {
  QR_RETURN_IF_ERROR(ValidatePeerStoreArgs(args));
  PeerStoreParams p{};
  for (int i = 0; i < args.num_dst; ++i) p.dst[i] = static_cast<char*>(args.dst[i]);
  p.num_dst = args.num_dst;
  p.vecs_per_dst = args.bytes_per_dst / 16;
  const hipStream_t stream = static_cast<hipStream_t>(args.stream);
  if (args.method == PeerStoreMethod::kSmStores) {
    hipLaunchKernelGGL(PeerStoreKernel, dim3(args.blocks), dim3(kPeerStoreThreads), 0, stream, p);
    QR_GPU_RETURN_IF_ERROR(hipGetLastError());
    return OkStatus();
  }
  p.chunk_vecs = static_cast<uint32_t>(args.chunk_bytes / 16);
  const int shared_bytes = static_cast<int>(2 * args.chunk_bytes);
  // Above 48 KiB of dynamic shared memory a kernel must opt in, once per
  // device: to the largest chunks' need, so that timing loops pay no host
  // call per launch. Not a stream operation: allowed while capturing.
  static std::atomic<uint64_t> raised_devices{0};
  int device = 0;
  QR_GPU_RETURN_IF_ERROR(hipGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (raised_devices.load(std::memory_order_relaxed) & bit) == 0) {
    QR_GPU_RETURN_IF_ERROR(hipFuncSetAttribute(reinterpret_cast<const void*>(&PeerStoreBulkKernel),
                                               hipFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(2 * kPeerStoreMaxChunkBytes)));
    raised_devices.fetch_or(bit, std::memory_order_relaxed);
  }
  hipLaunchKernelGGL(PeerStoreBulkKernel, dim3(args.blocks), dim3(kPeerStoreThreads),
                     static_cast<unsigned>(shared_bytes), stream, p);
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
