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
// --peer-store times rank 0's peer-store kernels instead
// (tools/kernel_cost_peer_store.h); --fused, --reduce-scatter and
// --all-gather are modes of their own (kernel_cost_fused.h,
// kernel_cost_collectives.h).
//
// The host-side logic is pure and tested in CI, one idea a file: this file
// (the flags), kernel_cost_cells.h (what to time, the statistics of the
// samples), kernel_cost_report.h (the banner, table, CSV and JSON),
// kernel_cost_peer_store.h; kernel_cost_main.cc drives the GPU.
#ifndef QR_TOOLS_KERNEL_COST_OPTIONS_H_
#define QR_TOOLS_KERNEL_COST_OPTIONS_H_

#include <cstddef>
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
// "shared" or "alone"; kInvalidArgument naming both otherwise.
[[nodiscard]] StatusOr<CostMode> ParseCostMode(const std::string& text);
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
// The same rule for any mode that launches rank 0 alone (--fused's too).
[[nodiscard]] Status CheckAloneVariant(bool alone, std::string_view variant);

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_OPTIONS_H_
