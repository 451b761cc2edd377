// qr-kernel-cost --fused (tools/kernel_cost_fused.h): every rank on GPU 0,
// through the shared runner (tools/bench_fused.h).
#include <string>
#include <vector>

#include "tools/bench_fused.h"
#include "tools/kernel_cost_fused.h"

namespace qr::cost {

int RunFusedMain(const std::vector<std::string>& args) {
  return RunFusedSweep(args, "qr-kernel-cost --fused", /*one_gpu=*/true);
}

}  // namespace qr::cost
