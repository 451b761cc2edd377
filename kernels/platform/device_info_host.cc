// device_info.h in the host-only flavour: no runtime, no driver, no answer.
#include "kernels/platform/device_info.h"

namespace qr::gpu {

int RuntimeVersion() { return 0; }
int DriverVersion() { return 0; }

StatusOr<PeerAccessAnswer> PeerAccessByPciBusId(const std::string&, const std::string&) {
  return UnavailableError(
      "PeerAccessByPciBusId: quickreduce was built without GPU support (host-only flavour)");
}

bool NvmlKnowsGpu(const std::string&) { return false; }

}  // namespace qr::gpu
