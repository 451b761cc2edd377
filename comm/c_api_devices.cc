// qr_devices_json (comm/quickreduce.h): the GPUs this process sees, by PCI
// bus id, the peer-access matrix exactly as the join's topology check
// (comm/topology.h) decides it, and the runtime and driver versions. For
// `python -m quickreduce doctor` and other diagnostics; no group is needed.
#include <exception>
#include <string>
#include <vector>

#include "comm/c_api_internal.h"
#include "comm/quickreduce.h"
#include "kernels/platform/device_info.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "nlohmann/json.hpp"

namespace qr {
namespace {

using nlohmann::json;

thread_local std::string devices_text;

json DevicesJson() {
  json j;
  j["platform"] = PlatformName(GpuPlatform());
  j["runtime_version"] = gpu::RuntimeVersion();
  j["driver_version"] = gpu::DriverVersion();
  std::vector<std::string> ids;
  json devices = json::array();
  for (int d = 0; d < gpu::DeviceCount(); ++d) {
    StatusOr<std::string> id = gpu::PciBusId(d);
    ids.push_back(id.ok() ? *id : "");
    devices.push_back({{"ordinal", d}, {"pci_bus_id", id.ok() ? json(*id) : json(nullptr)}});
  }
  j["devices"] = devices;
  // peer_access[i][j]: true/false, or null where nothing here could tell
  // (then the join decides by opening the handle); source says who answered.
  json matrix = json::array(), sources = json::array();
  for (size_t a = 0; a < ids.size(); ++a) {
    json row = json::array(), from = json::array();
    for (size_t b = 0; b < ids.size(); ++b) {
      if (a == b || ids[a].empty() || ids[b].empty()) {
        row.push_back(nullptr);
        from.push_back("");
        continue;
      }
      StatusOr<gpu::PeerAccessAnswer> answer = gpu::PeerAccessByPciBusId(ids[a], ids[b]);
      const bool known = answer.ok() && answer->can.has_value();
      row.push_back(known ? json(*answer->can) : json(nullptr));
      from.push_back(answer.ok() ? answer->source : answer.status().message());
    }
    matrix.push_back(row);
    sources.push_back(from);
  }
  j["peer_access"] = matrix;
  j["peer_access_source"] = sources;
  return j;
}

}  // namespace
}  // namespace qr

extern "C" {

const char* qr_devices_json(void) {
  try {
    qr::devices_text = qr::DevicesJson().dump();
  } catch (const std::exception& e) {
    // No exception crosses the C ABI (json::dump throws only on invalid UTF-8).
    qr::internal::RecordCStatus(qr::InternalError(std::string("qr_devices_json: ") + e.what()));
    return nullptr;
  }
  qr::internal::RecordCStatus(qr::OkStatus());
  return qr::devices_text.c_str();
}

}  // extern "C"
