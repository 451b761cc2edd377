// Which platform a group runs on, for the choices that depend on it (the
// built-in min-size table, whether bf16 is reduced through fp16 by default:
// comm/config.h). The GPU platform comes from the build flavour
// (--config=cuda or --config=rocm, bazel/gpu.bzl), so code outside
// kernels/platform never tests platform macros to learn it.
//
//   const Platform p = device == kDeviceHost ? Platform::kHost : GpuPlatform();
#ifndef QR_KERNELS_PLATFORM_PLATFORM_H_
#define QR_KERNELS_PLATFORM_PLATFORM_H_

namespace qr {

enum class Platform : int {
  kHost = 0,    // the host backend (POSIX shared memory, no GPU)
  kNvidia = 1,  // HIP on NVIDIA through nvcc; the kernels are built for Hopper (sm_90)
  kAmd = 2,     // HIP on AMD (gfx90a, gfx940: MI200, MI300)
};

// "host", "NVIDIA", "AMD"; "?" out of range.
const char* PlatformName(Platform platform);

// The platform of this build's GPU backend: kNvidia for --config=cuda, kAmd
// for --config=rocm, kHost for a build without a GPU backend (where no group
// runs on a GPU). Thread-safe, constant.
Platform GpuPlatform();

// Whether this build's GPU kernels run blocks as clusters that share their
// shared memory (kernels/platform/cluster.cuh kBlockClusters, the same fact
// for device code): NVIDIA, whose only target is sm_90; not AMD, not the
// host flavour. The fused kernel's row parts exchange through it, so the
// policy splits rows sooner where it holds (one_shot_fused_slots.h). The
// same on every rank of a group: a group runs one build.
bool GpuBlockClusters();

}  // namespace qr

#endif  // QR_KERNELS_PLATFORM_PLATFORM_H_
