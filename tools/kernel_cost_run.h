// qr-kernel-cost's runs, one file each (the binary's own header): the
// all-reduce cells (kernel_cost_all_reduce_main.cc), the peer-store cells
// (kernel_cost_peer_store_main.cc), --fused (kernel_cost_fused_main.cc,
// RunFusedMain in kernel_cost_fused.h); kernel_cost_main.cc parses the flags,
// checks the GPU and picks one.
#ifndef QR_TOOLS_KERNEL_COST_RUN_H_
#define QR_TOOLS_KERNEL_COST_RUN_H_

#include <functional>
#include <string>

#include "tools/kernel_cost_options.h"
#include "tools/kernel_cost_report.h"

namespace qr::cost {

// The all-reduce cells of run.options: every rank of a LocalGroup on GPU 0.
// The exit status of WriteCostOutputs, or 1 when the group cannot be built.
int RunAllReduceCost(CostRun run);

// --peer-store: rank 0's peer-store kernel into buffers of the other ranks.
// The exit status of WriteCostOutputs, or 1 when set-up fails.
int RunPeerStore(CostRun run);

// Writes the CSV and JSON the options ask for (each made only if asked) and
// gives the exit status: 1 if one cannot be written, else 3 if a cell
// failed, else 0.
int WriteCostOutputs(const CostOptions& o, const std::function<std::string()>& csv,
                     const std::function<std::string()>& json, bool failed);

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_RUN_H_
