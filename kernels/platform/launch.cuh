// Kernel launches that may overlap the previous kernel on the stream
// (programmatic dependent launch, NVIDIA Hopper and later), and the wait
// such a kernel runs before it touches what the previous kernel wrote.
// Include from .cu files only.
//
//   // host: a plain launch where the platform or device lacks the feature
//   QR_GPU_RETURN_IF_ERROR(platform::LaunchKernel(Kernel, grid, threads, stream,
//                                                  /*overlap=*/true, params));
//   // device, first statement of Kernel:
//   platform::WaitForPriorKernels();
//
// With overlap on NVIDIA sm_90+, the launch carries
// cudaLaunchAttributeProgrammaticStreamSerialization: the kernel's blocks may
// start once every block of the previous kernel on the stream has started
// and triggered or ended (our kernels never trigger early, so: ended or,
// for a GEMM that triggers, triggered), and WaitForPriorKernels
// (griddepcontrol.wait) returns once the previous kernel has completed and
// its memory operations are visible. What the launch gains is the launch
// latency and the block start-up before that wait. Inside stream capture
// the attribute becomes a programmatic edge of the graph (CUDA 12.3+).
// Elsewhere (AMD, older NVIDIA GPUs, overlap off) it is a plain launch and
// WaitForPriorKernels does nothing: stream order already holds.
#ifndef QR_KERNELS_PLATFORM_LAUNCH_CUH_
#define QR_KERNELS_PLATFORM_LAUNCH_CUH_

#include <atomic>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

// Blocks until the kernels this one depends on programmatically completed
// and their writes are visible; a no-op without such a dependency. Every
// thread that reads or writes memory the previous kernel may touch calls it
// first (calling it in every thread is cheapest and simplest).
QR_DEVICE_INLINE void WaitForPriorKernels() {
#if QR_PLATFORM_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the kernel launched next on the stream with programmatic overlap start
// its blocks once every block of this kernel has called this or ended (a
// GEMM calls it before its epilogue). Nothing becomes visible early: the
// dependent's WaitForPriorKernels still waits for this kernel's end.
QR_DEVICE_INLINE void AllowDependentsToStart() {
#if QR_PLATFORM_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Whether the current device can launch with programmatic overlap (NVIDIA
// compute capability 9.0 and later). Cached per device; false on AMD.
inline bool ProgrammaticLaunchSupported() {
#if QR_PLATFORM_CUDA
  constexpr int kMaxDevices = 64;
  // 0 unknown, 1 no, 2 yes.
  static std::atomic<int> known[kMaxDevices];
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess || device < 0 || device >= kMaxDevices) return false;
  int v = known[device].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    if (hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, device) !=
        hipSuccess) {
      return false;
    }
    v = major >= 9 ? 2 : 1;
    known[device].store(v, std::memory_order_relaxed);
  }
  return v == 2;
#else
  return false;
#endif
}

// Launches fn<<<grid, threads, shared_bytes, stream>>>(params), with
// programmatic overlap of the previous kernel when `overlap` and the device
// supports it, as clusters of `cluster` blocks when it is above 1 (where
// kBlockClusters, cluster.cuh: grid a multiple of it, at most
// kMaxPortableCluster; elsewhere hipErrorInvalidValue). Returns the launch's
// error (hipSuccess when it was enqueued).
template <typename Params>
hipError_t LaunchKernelShared(void (*fn)(Params), dim3 grid, dim3 threads, size_t shared_bytes,
                              hipStream_t stream, bool overlap, const Params& params,
                              int cluster = 1) {
#if QR_PLATFORM_CUDA
  const bool programmatic = overlap && ProgrammaticLaunchSupported();
  if (programmatic || cluster > 1) {
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (programmatic) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = static_cast<unsigned>(cluster);
      attr[n].val.clusterDim.y = 1;
      attr[n++].val.clusterDim.z = 1;
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = threads;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = n;
    return hipCUDAErrorTohipError(cudaLaunchKernelEx(&config, fn, params));
  }
#else
  (void)overlap;
  if (cluster > 1) return hipErrorInvalidValue;
#endif
  hipLaunchKernelGGL(fn, grid, threads, shared_bytes, stream, params);
  return hipGetLastError();
}

// The same without dynamic shared memory.
template <typename Params>
hipError_t LaunchKernel(void (*fn)(Params), dim3 grid, dim3 threads, hipStream_t stream,
                        bool overlap, const Params& params) {
  return LaunchKernelShared(fn, grid, threads, 0, stream, overlap, params);
}

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_LAUNCH_CUH_
