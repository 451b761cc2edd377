// qr-bench's plan: the ordered list of cells a run times, the timing method's
// batch sizes, and the run-time estimate printed before the sweep starts.
//
// Timing method (one cell): every rank's work for one batch is `calls`
// all-reduces (CallsPerBatch; a captured graph replayed once in graph mode,
// or `calls` launches from the host in eager mode). One warm-up batch, one
// probe batch timed with events on rank 0's stream, then kTimedBatches
// batches of RepsForTarget(probe) replays each (about kBatchTargetMs each);
// the cell's time is the median batch's time divided by the calls in it.
#ifndef QR_TOOLS_BENCH_PLAN_H_
#define QR_TOOLS_BENCH_PLAN_H_

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/types.h"
#include "tools/bench_options.h"

namespace qr::bench {

inline constexpr double kBatchTargetMs = 20.0;
inline constexpr int kTimedBatches = 3;
inline constexpr int kMinReps = 3;
inline constexpr int kMaxReps = 200;

// One thing to time. codec is meaningful for two-shot only (kFp otherwise).
struct BenchCell {
  size_t bytes = 0;
  BenchDType dtype = BenchDType::kFp16;
  BenchMode mode = BenchMode::kGraph;
  BenchAlgo algo = BenchAlgo::kTwoShot;  // never kPolicy: the policy is not timed
  Codec codec = Codec::kFp;
};

// Cells in run order: sizes ascending, then dtypes, then modes (eager only up
// to o.eager_max_bytes); within that NCCL, NCCL symmetric (o.nccl_symm),
// one-shot (when bytes <= one_shot_max_bytes), then two-shot per regime.
// bf16cast has no NCCL cells when bf16 is swept too: NCCL reduces bf16
// either way and the runner reuses bf16's numbers.
std::vector<BenchCell> PlanCells(const BenchOptions& o, size_t one_shot_max_bytes);

// All-reduces per batch: min(50, 256 MiB / bytes), at least 2.
int CallsPerBatch(size_t bytes);
// Replays per timed batch for a probe batch that took replay_ms:
// kBatchTargetMs / replay_ms clamped to [kMinReps, kMaxReps].
int RepsForTarget(double replay_ms);
// Median of the samples (mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> samples);

// Seconds the cell is expected to take with the method above, from a rough
// model (8 us + bytes at 300 GB/s per call, +5 us eager, plus capture costs).
double EstimateCellSeconds(const BenchCell& cell);
// The whole run: cells plus the peer-bandwidth measurement.
double EstimateRunSeconds(const std::vector<BenchCell>& cells, const BenchOptions& o);

// "64M bf16 graph two-shot INT4" for progress lines.
std::string CellLabel(const BenchCell& cell);

inline constexpr int kMaxGroupRebuilds = 3;

// The sweep's rules for failures, apart from the GPU so that the host tests
// them: a failing cell is skipped, not fatal. An NCCL failure drops the
// baseline for the rest of the run; a one-shot launch error (a group not
// poisoned) drops one-shot; a poisoned group (a kernel timed out or saw an
// abort) is rebuilt, at most kMaxGroupRebuilds times, then the sweep stops.
// NCCL's symmetric baseline is dropped like NCCL's, on its own.
class SweepGuard {
 public:
  explicit SweepGuard(bool have_nccl, bool have_nccl_symm = false)
      : nccl_(have_nccl), nccl_symm_(have_nccl_symm) {}

  // False for cells of an algorithm dropped earlier (or NCCL never loaded).
  bool ShouldTime(const BenchCell& cell) const;
  bool nccl() const { return nccl_; }
  bool nccl_symm() const { return nccl_symm_; }

  struct Verdict {
    std::vector<std::string> failures;  // lines for the report, beyond the cell's own
    bool rebuild_group = false;
    bool stop = false;  // too many rebuilds
  };
  // After `cell` failed; `poisoned`: a kernel left an error word set.
  Verdict OnFailure(const BenchCell& cell, bool poisoned);

 private:
  bool nccl_;
  bool nccl_symm_;
  bool one_shot_ = true;
  int rebuilds_ = 0;
};

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_PLAN_H_
