// The GPU side of the fused collective's timings (tools/kernel_cost_fused.h
// has the flags, cells, table and CSV): the ranks of a LocalGroup, each with
// its input, residual, weight and two outputs; per cell and variant, `iters`
// calls captured into one graph per rank, all ranks' graphs replayed; the
// median over `reps` repetitions of the time per call. qr-kernel-cost
// --fused puts every rank on GPU 0 (kernel costs, from the earliest start to
// the latest stop over the ranks' streams); qr-bench --fused gives each rank
// its own GPU (timed on rank 0's stream).
#ifndef QR_TOOLS_BENCH_FUSED_H_
#define QR_TOOLS_BENCH_FUSED_H_

#include <string>
#include <vector>

namespace qr::cost {

// Parses args (the flags after "--fused"), times every cell, prints the
// table and writes the CSV. `tool` names the program in messages. Exit 0,
// 1 (setup failed: too few GPUs, say), 2 (bad flags), 3 (some cell failed;
// every line and the CSV still written).
int RunFusedSweep(const std::vector<std::string>& args, const char* tool, bool one_gpu);

}  // namespace qr::cost

#endif  // QR_TOOLS_BENCH_FUSED_H_
