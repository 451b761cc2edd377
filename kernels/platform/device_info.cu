#include <hip/hip_runtime.h>

#include "common/status_macros.h"
#include "kernels/platform/device_info.h"
#include "kernels/platform/device_macros.h"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/nvml_peer.h"

namespace qr::gpu {
namespace {

// The ordinal of a visible GPU by PCI bus id, or -1 when this process does
// not see it (the runtime's error is cleared: it is an answer, not a fault).
int VisibleOrdinal(const std::string& pci) {
  int d = -1;
  if (hipDeviceGetByPCIBusId(&d, pci.c_str()) != hipSuccess) {
    (void)hipGetLastError();
    return -1;
  }
  return d;
}

}  // namespace

int RuntimeVersion() {
  int v = 0;
  if (hipRuntimeGetVersion(&v) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return v;
}

int DriverVersion() {
  int v = 0;
  if (hipDriverGetVersion(&v) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return v;
}

StatusOr<PeerAccessAnswer> PeerAccessByPciBusId(const std::string& a, const std::string& b) {
  const int da = VisibleOrdinal(a), db = VisibleOrdinal(b);
  if (da >= 0 && db >= 0 && da != db) {
    int can = 0;
    QR_GPU_RETURN_IF_ERROR(hipDeviceCanAccessPeer(&can, da, db));
    return PeerAccessAnswer{can != 0, "runtime"};
  }
#if QR_PLATFORM_CUDA
  if (std::optional<bool> can = NvmlPeerAccess(a, b); can.has_value()) {
    return PeerAccessAnswer{can, "nvml"};
  }
#endif
  return PeerAccessAnswer{std::nullopt, ""};
}

bool NvmlKnowsGpu(const std::string& id) {
#if QR_PLATFORM_CUDA
  return NvmlKnows(id);
#else
  (void)id;
  return false;
#endif
}

}  // namespace qr::gpu
