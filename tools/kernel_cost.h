// qr-kernel-cost: what the all-reduce kernels cost on ONE GPU, every rank of
// a LocalGroup on GPU 0 (kernels/gpu/local_group.h, gpus = 1). These are
// kernel costs, not link measurements: peer stores land in the same HBM, and
// ranks share the multiprocessors.
//
// Modes:
//   shared  every rank's kernel is launched for each call (their waits are
//           real); per-call time = elapsed of `iters` back-to-back calls /
//           iters, events on the streams.
//   alone   only rank 0's kernel is launched: one rank's own SM-side cost
//           (stores to its peers included). Only a timing variant that skips
//           the waits (TwoShotTimingVariant() "no_waits" or "bare") can run
//           it; the real kernels would wait for peers that never come.
// Launch: eager (one host launch per call) or graph (each rank's `iters`
// calls captured into one graph and replayed: no host launch cost), both
// from one host thread that issues rank 0's call, then rank 1's, ...; or
// eager-threads / graph-threads: each rank's calls come from its own host
// thread on its own stream, as independent processes issue them, the
// threads released together by a spinning barrier for every repetition (and
// rank r optionally r x --stagger microseconds later). Those default to
// --iters 1 and --reps 200, so that every sample is one call, and report
// min / p50 / p90 / p99 / max of the samples and the start skew of the
// ranks (latest minus earliest start event of a repetition).
//
// --peer-store (issue 18 item 8) times something else: rank 0's peer-store
// kernel (kernels/gpu/peer_bandwidth.h) writing into the buffers of the
// other world_size - 1 ranks, all on GPU 0, by SM stores and by TMA bulk
// copies of each --peer-tma-chunks size, at each --sizes size (per
// destination) and --peer-blocks grid; GB/s and microseconds per method, and
// each TMA cell's speed against the SM stores of its size and grid. On one
// GPU this measures the SM/TMA issue side and HBM, not NVLink; qr-bench
// --peer-tma-chunks measures the link on two GPUs.
//
// This file is the host-side logic (flags, cells, statistics, outputs), pure
// and tested in CI; kernel_cost_main.cc drives the GPU.
#ifndef QR_TOOLS_KERNEL_COST_H_
#define QR_TOOLS_KERNEL_COST_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/types.h"
#include "tools/bench_options.h"

namespace qr::cost {

using bench::BenchDType;

enum class CostMode : int { kShared = 0, kAlone = 1 };
enum class CostLaunch : int { kEager = 0, kGraph = 1, kEagerThreads = 2, kGraphThreads = 3 };
const char* CostModeName(CostMode mode);  // "shared", "alone"
// "eager", "graph", "eager-threads", "graph-threads"
const char* CostLaunchName(CostLaunch launch);
// Whether each rank's calls come from a host thread of its own.
bool LaunchUsesThreads(CostLaunch launch);
// Whether the calls are captured once and replayed.
bool LaunchUsesGraphs(CostLaunch launch);

struct CostOptions {
  std::vector<size_t> sizes;  // bytes, ascending, unique
  std::vector<BenchDType> dtypes;
  std::vector<Codec> regimes;  // two-shot only; one-shot sends exact values
  Algorithm algorithm = Algorithm::kTwoShot;
  CostMode mode = CostMode::kShared;
  CostLaunch launch = CostLaunch::kEager;
  int world_size = 2;
  int reps = 7;        // timed repetitions per cell; 200 with a threaded launch
  int iters = 0;       // calls per repetition; 0: bench::CallsPerBatch(bytes); 1 threaded
  int warmup = 2;      // untimed repetitions first
  int stagger_us = 0;  // threaded launches: rank r starts r x this after the release
  std::string csv_path;
  std::string json_path;
  bool help = false;
  std::vector<std::string> notes;  // adjustments worth telling the user
  // --peer-store: the peer-store kernels instead of the all-reduce (above).
  bool peer_store = false;
  std::vector<size_t> peer_tma_chunks;  // default 4K,8K,16K,32K
  std::vector<int> peer_blocks;         // grids; 0 = 2 per multiprocessor (qr-bench's)
};

// argv[1..]. --sizes/--dtypes/--regimes/--world-size are read as qr-bench
// reads them (bench::ParseBenchArgs, same messages). Defaults: sizes
// 4M,64M,256M for two-shot and 4K,64K,256K,1M,4M for one-shot, every dtype,
// FP..INT3 (INT3 left out at world size 4 and 8), two-shot, shared, eager,
// world size 2; --reps 200 and --iters 1 with a threaded launch.
// kInvalidArgument naming the flag for bad input, a one-shot size above
// OneShotMaxBytes(world size), --regimes with one-shot, a threaded launch
// with --mode alone (one rank launched: nothing to release together), or
// --stagger without a threaded launch. --peer-store: sizes default to
// 16M,64M,256M,1G, chunks to 4K,8K,16K,32K, grids to 0; the all-reduce's
// --algorithm, --mode, --launch, --dtypes, --regimes and --stagger are
// refused with it, and --peer-tma-chunks / --peer-blocks without it.
[[nodiscard]] StatusOr<CostOptions> ParseCostArgs(const std::vector<std::string>& args);
std::string CostUsage();

// Whether this binary (its TwoShotTimingVariant(), "" for the real kernels)
// can run the options: alone needs "no_waits" or "bare". kUnsupported
// saying which binary to use otherwise.
[[nodiscard]] Status CheckVariant(const CostOptions& o, std::string_view variant);

// One thing to time; codec is kFp for one-shot.
struct CostCell {
  size_t bytes = 0;
  BenchDType dtype = BenchDType::kFp16;
  Codec codec = Codec::kFp;
};
// Sizes ascending, then dtypes, then regimes (one cell per size and dtype for
// one-shot).
std::vector<CostCell> PlanCostCells(const CostOptions& o);
// Calls per repetition for a cell of `bytes`.
int ItersFor(const CostOptions& o, size_t bytes);

// The q-quantile (0 <= q <= 1) of the samples, interpolated linearly between
// the two nearest order statistics (position q x (n - 1)), so that q = 0.5 is
// bench::Median; 0 when empty.
double Percentile(std::vector<double> samples, double q);

// A cell's per-call times, one per repetition (microseconds), summarised.
struct CostResult {
  CostCell cell;
  int iters = 0;
  std::vector<double> samples_us;
  double best_us = 0;                         // smallest sample
  double median_us = 0;                       // bench::Median
  double p90_us = 0, p99_us = 0, max_us = 0;  // Percentile
  // Threaded launches: per repetition, the latest minus the earliest start
  // event over the ranks' streams; empty otherwise.
  std::vector<double> skew_us;
  double skew_median_us = 0, skew_max_us = 0;
  std::string error;  // non-empty: the cell failed (no times)
};
CostResult Summarize(const CostCell& cell, int iters, std::vector<double> samples_us,
                     std::vector<double> skew_us = {});

// A reusable barrier that spins: the threads it releases leave within a
// fraction of a microsecond of each other, where a condition variable wakes
// them one by one, tens of microseconds apart, which would add a start skew
// of its own to what the threaded launches measure. It yields now and then
// so that more threads than cores still get through.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  SpinBarrier(const SpinBarrier&) = delete;
  SpinBarrier& operator=(const SpinBarrier&) = delete;
  // Returns once n threads have called it in this round.
  void Wait();

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> round_{0};
};

// What every output records about the run.
struct CostRun {
  CostOptions options;
  std::string variant;  // "" = real kernels
  std::string gpu;
  int max_blocks = 0;
  std::string command_line;
  std::string date;         // ISO 8601 UTC
  int multiprocessors = 0;  // --peer-store: what a grid of 0 means
};

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

// The lines printed before the first cell: ranks share one GPU, kernel
// costs not link measurements, the variant, the mode and method.
std::string Banner(const CostRun& run);
// Best, median and GB/s; min / p50 / p90 / p99 / max and the skew for the
// threaded launches.
std::string CostTableHeader(const CostRun& run);
std::string CostTableLine(const CostRun& run, const CostResult& r);
// CSV with a header line; one line per result, trailing newlines.
std::string CostCsvHeader();
std::string CostCsvLine(const CostRun& run, const CostResult& r);
// {"run": {...}, "results": [...]}, pretty-printed.
std::string CostJson(const CostRun& run, const std::vector<CostResult>& results);

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_H_
