// NVML's answer to "can GPU a read and write GPU b's memory?" for GPUs named
// by PCI bus id. NVML enumerates every GPU of the machine whatever
// CUDA_VISIBLE_DEVICES says, so it answers for peers this process's CUDA
// runtime cannot see (one visible GPU per process). NVIDIA only; the library
// is opened with dlopen (libnvidia-ml.so.1 ships with the driver), so nothing
// links against it and a machine without it simply gets no answer.
#ifndef QR_KERNELS_PLATFORM_NVML_PEER_H_
#define QR_KERNELS_PLATFORM_NVML_PEER_H_

#include <optional>
#include <string>

namespace qr::gpu {

// true when NVML reports P2P read and write OK from a to b, false when it
// reports either not OK, nullopt when NVML is missing, fails to initialise or
// does not know either id. Thread-safe (NVML is initialised once, never shut
// down).
std::optional<bool> NvmlPeerAccess(const std::string& a, const std::string& b);

// Whether NVML is there and knows the GPU with PCI bus id `id`.
bool NvmlKnows(const std::string& id);

}  // namespace qr::gpu

#endif  // QR_KERNELS_PLATFORM_NVML_PEER_H_
