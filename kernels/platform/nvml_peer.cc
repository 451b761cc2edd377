#include "kernels/platform/nvml_peer.h"

#include <dlfcn.h>

#include <mutex>

namespace qr::gpu {
namespace {

// The few NVML entry points used, by their documented C signatures (nvml.h
// is not installed where the library is built; the ABI is stable).
using NvmlDevice = void*;
using InitFn = int (*)();
using ByPciFn = int (*)(const char*, NvmlDevice*);
using P2PFn = int (*)(NvmlDevice, NvmlDevice, int, int*);
constexpr int kNvmlSuccess = 0;
constexpr int kP2PRead = 0;   // NVML_P2P_CAPS_INDEX_READ
constexpr int kP2PWrite = 1;  // NVML_P2P_CAPS_INDEX_WRITE
constexpr int kP2POk = 0;     // NVML_P2P_STATUS_OK

struct Nvml {
  ByPciFn by_pci = nullptr;
  P2PFn p2p = nullptr;
};

const Nvml* Load() {
  static Nvml nvml;
  static const Nvml* loaded = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;  // kept open for the process's lifetime
    auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
    nvml.by_pci = reinterpret_cast<ByPciFn>(::dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    nvml.p2p = reinterpret_cast<P2PFn>(::dlsym(lib, "nvmlDeviceGetP2PStatus"));
    if (init == nullptr || nvml.by_pci == nullptr || nvml.p2p == nullptr) return;
    if (init() != kNvmlSuccess) return;
    loaded = &nvml;
  });
  return loaded;
}

// NVML by PCI bus id. The runtime names GPUs "0000:19:00.0"; NVML's own
// form has an 8-digit domain ("00000000:19:00.0"), so that one is tried too.
bool Lookup(const Nvml& nvml, const std::string& id, NvmlDevice* d) {
  if (nvml.by_pci(id.c_str(), d) == kNvmlSuccess) return true;
  const size_t colon = id.find(':');
  if (colon == std::string::npos || colon >= 8) return false;
  const std::string wide = std::string(8 - colon, '0') + id;
  return nvml.by_pci(wide.c_str(), d) == kNvmlSuccess;
}

}  // namespace

std::optional<bool> NvmlPeerAccess(const std::string& a, const std::string& b) {
  const Nvml* nvml = Load();
  if (nvml == nullptr) return std::nullopt;
  NvmlDevice da = nullptr, db = nullptr;
  if (!Lookup(*nvml, a, &da) || !Lookup(*nvml, b, &db)) return std::nullopt;
  for (int index : {kP2PRead, kP2PWrite}) {
    int status = -1;
    if (nvml->p2p(da, db, index, &status) != kNvmlSuccess) return std::nullopt;
    if (status != kP2POk) return false;
  }
  return true;
}

bool NvmlKnows(const std::string& id) {
  const Nvml* nvml = Load();
  NvmlDevice d = nullptr;
  return nvml != nullptr && Lookup(*nvml, id, &d);
}

}  // namespace qr::gpu
