// What the GPU runtime and driver say about the machine, for the join's
// topology check (comm/topology.h) and `quickreduce doctor`: the runtime and
// driver versions, and peer access between two GPUs named by PCI bus id,
// including GPUs this process cannot see (one visible GPU per process:
// CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES per rank).
//
// How peer access is decided (docs/gpu-testing.md "Topology"):
//   1. both GPUs visible here: the runtime's DeviceCanAccessPeer ("runtime");
//   2. otherwise, on NVIDIA, NVML (P2P read and write status), which sees
//      every GPU whatever CUDA_VISIBLE_DEVICES says ("nvml");
//   3. otherwise no answer (nullopt): the join then relies on the test that
//      matters, opening the peer's IPC handle and seeing its stores in the
//      join barrier (comm/gpu_backend.cc), both of which fail without a path.
// Thread-safe. In the host-only flavour there is no runtime: versions are 0
// and PeerAccessByPciBusId is kUnavailable.
#ifndef QR_KERNELS_PLATFORM_DEVICE_INFO_H_
#define QR_KERNELS_PLATFORM_DEVICE_INFO_H_

#include <optional>
#include <string>

#include "common/status.h"

namespace qr::gpu {

// The runtime this library runs on (CUDA: 1000 * major + 10 * minor, e.g.
// 13000; HIP: its HIP_VERSION number); 0 when unknown.
int RuntimeVersion();
// The newest CUDA (or HIP) version the installed driver supports, in the same
// encoding; 0 without a driver.
int DriverVersion();

struct PeerAccessAnswer {
  std::optional<bool> can;  // nullopt: nothing here could tell
  std::string source;       // "runtime", "nvml", or "" without an answer
};

// Whether GPU `a` can read and write GPU `b`'s memory (a != b), both named
// as PciBusId (gpu_api.h) names them. kInternal for a runtime error.
[[nodiscard]] StatusOr<PeerAccessAnswer> PeerAccessByPciBusId(const std::string& a,
                                                              const std::string& b);

// Whether the source of step 2 above (NVML, NVIDIA only) knows the GPU with
// PCI bus id `id`, visible here or not. False elsewhere.
bool NvmlKnowsGpu(const std::string& id);

}  // namespace qr::gpu

#endif  // QR_KERNELS_PLATFORM_DEVICE_INFO_H_
