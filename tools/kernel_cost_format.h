// The number and field formats that qr-kernel-cost's all-reduce outputs
// (kernel_cost_report.h) and --peer-store outputs (kernel_cost_peer_store.h)
// share, so that both write GB/s and messages alike.
#ifndef QR_TOOLS_KERNEL_COST_FORMAT_H_
#define QR_TOOLS_KERNEL_COST_FORMAT_H_

#include <algorithm>
#include <cstddef>
#include <string>

namespace qr::cost {

// Bytes per microsecond as GB/s (1e9 bytes); 0 for no time.
inline double GBps(size_t bytes, double us) {
  return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0;
}

// A message as one CSV field: no separators, one line.
inline std::string CsvField(std::string text) {
  std::replace(text.begin(), text.end(), ',', ';');
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_FORMAT_H_
