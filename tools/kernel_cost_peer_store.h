// qr-kernel-cost --peer-store (issue 18 item 8) times something else than
// the all-reduce (kernel_cost_options.h): rank 0's peer-store kernel
// (kernels/gpu/peer_bandwidth.h) writing into the buffers of the other
// world_size - 1 ranks, all on GPU 0, by SM stores and by TMA bulk copies of
// each --peer-tma-chunks size, at each --sizes size (per destination) and
// --peer-blocks grid; GB/s and microseconds per method, and each TMA cell's
// speed against the SM stores of its size and grid. On one GPU this
// measures the SM/TMA issue side and HBM, not NVLink; qr-bench
// --peer-tma-chunks measures the link on two GPUs.
//
// Its flags are qr-kernel-cost's (kernel_cost_options.h); this file plans
// the cells, summarises their samples and writes the outputs.
#ifndef QR_TOOLS_KERNEL_COST_PEER_STORE_H_
#define QR_TOOLS_KERNEL_COST_PEER_STORE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "tools/bench_options.h"
#include "tools/kernel_cost_options.h"
#include "tools/kernel_cost_report.h"

namespace qr::cost {

// --peer-store: one thing to time.
struct PeerStoreCell {
  size_t bytes = 0;  // per destination
  bench::PeerStoreChoice method;
  int blocks = 0;  // as asked: 0 = 2 per multiprocessor
};
// Sizes ascending, then grids as given, then the SM stores and each TMA
// chunk as given (so that a TMA cell follows the SM cell it is compared to).
std::vector<PeerStoreCell> PlanPeerStoreCells(const CostOptions& o);
// The grid a cell launches: blocks, or 2 x multiprocessors for 0.
int PeerStoreGrid(const PeerStoreCell& cell, int multiprocessors);

struct PeerStoreResult {
  PeerStoreCell cell;
  int destinations = 0;  // world_size - 1
  int iters = 0;
  std::vector<double> samples_us;  // per launch, one per repetition
  double best_us = 0, median_us = 0;
  double gbps = 0;    // bytes x destinations / best_us
  double vs_sm = 0;   // gbps / the SM cell's of the same size and grid; 0 when unknown
  std::string error;  // non-empty: the cell failed (no times)
};
// Fills best, median and GB/s from the samples.
PeerStoreResult SummarizePeerStore(const PeerStoreCell& cell, int destinations, int iters,
                                   std::vector<double> samples_us);
// Sets every result's vs_sm from the SM result of its size and grid.
void ComparePeerStoreToSm(std::vector<PeerStoreResult>& results);

// --peer-store's outputs: the banner (ONE GPU: issue side and HBM, not
// NVLink), a table line per cell, CSV, JSON.
std::string PeerStoreBanner(const CostRun& run);
std::string PeerStoreTableHeader();
std::string PeerStoreTableLine(const CostRun& run, const PeerStoreResult& r);
std::string PeerStoreCsvHeader();
std::string PeerStoreCsvLine(const CostRun& run, const PeerStoreResult& r);
std::string PeerStoreJson(const CostRun& run, const std::vector<PeerStoreResult>& results);

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_PEER_STORE_H_
