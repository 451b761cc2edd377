#include "kernels/platform/platform.h"

namespace qr {

const char* PlatformName(Platform platform) {
  switch (platform) {
    case Platform::kHost:
      return "host";
    case Platform::kNvidia:
      return "NVIDIA";
    case Platform::kAmd:
      return "AMD";
  }
  return "?";
}

// QR_BUILD_GPU_* come from the build flavour (BUILD: local_defines), not from
// a compiler: this file is plain C++ in every flavour.
Platform GpuPlatform() {
#if defined(QR_BUILD_GPU_NVIDIA)
  return Platform::kNvidia;
#elif defined(QR_BUILD_GPU_AMD)
  return Platform::kAmd;
#else
  return Platform::kHost;
#endif
}

bool GpuBlockClusters() { return GpuPlatform() == Platform::kNvidia; }

}  // namespace qr
