// Blocks launched together as a cluster that read and write each other's
// shared memory (NVIDIA thread block clusters and distributed shared
// memory, sm_90: the only NVIDIA target of this build, bazel/gpu.bzl). AMD
// has none: there kBlockClusters is false, the device calls below do
// nothing, and callers keep their exchange through global memory, choosing
// at compile time (a condition on the constexpr platform::kBlockClusters).
// Include from .cu files only.
//
//   // device: every thread of every block of the cluster, the same count of
//   // arrive/wait pairs; a block never returns while a peer may still store
//   // into its shared memory
//   platform::ClusterArriveRelaxed();           // early: "this block runs"
//   ...
//   platform::ClusterWait();                    // before the first remote store
//   platform::StoreClusterShared32(&lanes[i], rank, v);
//   platform::ClusterArrive();                  // release: my stores
//   platform::ClusterWait();                    // acquire: everyone's
//
// The host side (the launch attribute) is LaunchKernelShared's `cluster`
// (launch.cuh); ResidentClusters below bounds a grid that must be resident.
#ifndef QR_KERNELS_PLATFORM_CLUSTER_CUH_
#define QR_KERNELS_PLATFORM_CLUSTER_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

// The same fact as GpuBlockClusters() (platform.h), at compile time for
// device code: both come from the build flavour.
inline constexpr bool kBlockClusters = QR_PLATFORM_CUDA != 0;

// Clusters of at most this many blocks launch without opting in to a
// non-portable size.
inline constexpr int kMaxPortableCluster = 8;

#if QR_PLATFORM_CUDA && defined(__CUDA_ARCH__)
static_assert(__CUDA_ARCH__ >= 900, "thread block clusters need sm_90");

// Arrive at the cluster barrier without ordering memory: the block has
// started, so peers may store into its shared memory after their wait.
QR_DEVICE_INLINE void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
// Arrive with release semantics: this thread's earlier stores (its own
// block's shared memory and peers') are visible to whoever then waits.
QR_DEVICE_INLINE void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
// Waits until every thread of the cluster arrived (acquire).
QR_DEVICE_INLINE void ClusterWait() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }

// Stores v at `local` (an address in this block's shared memory) of the
// cluster's block `rank`: the same variable in that block.
QR_DEVICE_INLINE void StoreClusterShared32(const void* local, unsigned rank, uint32_t v) {
  const auto cta = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(cta), "r"(rank));
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(v) : "memory");
}
#else
QR_DEVICE_INLINE void ClusterArriveRelaxed() {}
QR_DEVICE_INLINE void ClusterArrive() {}
QR_DEVICE_INLINE void ClusterWait() {}
QR_DEVICE_INLINE void StoreClusterShared32(const void*, unsigned, uint32_t) {}
#endif

// Clusters of `cluster` blocks of fn (threads and dynamic shared memory a
// block as given) the current device keeps resident at once, in *clusters;
// with cluster 1 or no clusters on the platform, resident blocks.
template <typename Params>
hipError_t ResidentClusters(void (*fn)(Params), int threads, size_t shared_bytes, int cluster,
                            int* clusters) {
  *clusters = 0;
#if QR_PLATFORM_CUDA
  if (cluster > 1) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(cluster));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = shared_bytes;
    config.attrs = attr;
    config.numAttrs = 1;
    return hipCUDAErrorTohipError(
        cudaOccupancyMaxActiveClusters(clusters, reinterpret_cast<const void*>(fn), &config));
  }
#endif
  if (cluster > 1) return hipErrorInvalidValue;
  int device = 0;
  int per_sm = 0;
  int sms = 0;
  hipError_t e = hipGetDevice(&device);
  if (e == hipSuccess) {
    e = hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(fn),
                                                     threads, shared_bytes);
  }
  if (e == hipSuccess)
    e = hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device);
  if (e == hipSuccess) *clusters = per_sm * sms;
  return e;
}

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_CLUSTER_CUH_
