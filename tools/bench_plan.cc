#include "tools/bench_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/bytes.h"

namespace qr::bench {

std::vector<BenchCell> PlanCells(const BenchOptions& o, size_t one_shot_max_bytes) {
  const bool have_bf16 =
      std::find(o.dtypes.begin(), o.dtypes.end(), BenchDType::kBf16) != o.dtypes.end();
  std::vector<BenchCell> cells;
  for (size_t bytes : o.sizes) {
    for (BenchDType dtype : o.dtypes) {
      for (BenchMode mode : o.modes) {
        if (mode == BenchMode::kEager && bytes > o.eager_max_bytes) continue;
        BenchCell c{bytes, dtype, mode, BenchAlgo::kNccl, Codec::kFp};
        if (o.nccl && !(dtype == BenchDType::kBf16Cast && have_bf16)) {
          cells.push_back(c);
          c.algo = BenchAlgo::kNcclSymm;
          if (o.nccl_symm) cells.push_back(c);
        }
        if (o.one_shot && bytes <= one_shot_max_bytes) {
          c.algo = BenchAlgo::kOneShot;
          cells.push_back(c);
        }
        if (o.two_shot) {
          c.algo = BenchAlgo::kTwoShot;
          for (Codec codec : o.regimes) {
            c.codec = codec;
            cells.push_back(c);
          }
        }
      }
    }
  }
  return cells;
}

int CallsPerBatch(size_t bytes) {
  const size_t calls = (size_t{256} << 20) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(calls, 2, 50));
}

int RepsForTarget(double replay_ms) {
  if (!(replay_ms > 0)) return kMaxReps;
  const double reps = kBatchTargetMs / replay_ms;
  if (reps >= kMaxReps) return kMaxReps;
  return std::max(kMinReps, static_cast<int>(reps));
}

double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

double EstimateCellSeconds(const BenchCell& cell) {
  const double call_us =
      8.0 + static_cast<double>(cell.bytes) / 300e3 + (cell.mode == BenchMode::kEager ? 5.0 : 0.0);
  const double replay_ms = CallsPerBatch(cell.bytes) * call_us / 1e3;
  const int reps = RepsForTarget(replay_ms);
  double setup_s = 0.002;
  if (cell.mode == BenchMode::kGraph) setup_s += IsBaseline(cell.algo) ? 0.03 : 0.005;
  return (2 + kTimedBatches * reps) * replay_ms / 1e3 + setup_s;
}

double EstimateRunSeconds(const std::vector<BenchCell>& cells, const BenchOptions& o) {
  double s = 3.0;  // group and NCCL set-up, buffer fill
  for (const BenchCell& c : cells) s += EstimateCellSeconds(c);
  if (o.peer_bandwidth) {
    // Warm-up plus reps, concurrently and then each rank alone, at ~300 GB/s.
    const double rep_s = static_cast<double>(o.peer_bytes) * (o.world_size - 1) / 300e9;
    s += (1 + o.world_size) * (1 + o.peer_reps) * rep_s;
  }
  return s;
}

std::string CellLabel(const BenchCell& cell) {
  std::string s =
      fmt::format("{} {} {} {}", FormatBytes(cell.bytes, ByteStyle::kCompact),
                  BenchDTypeName(cell.dtype), BenchModeName(cell.mode), BenchAlgoName(cell.algo));
  if (cell.algo == BenchAlgo::kTwoShot) s += fmt::format(" {}", CodecName(cell.codec));
  return s;
}

bool SweepGuard::ShouldTime(const BenchCell& cell) const {
  if (cell.algo == BenchAlgo::kNccl) return nccl_;
  if (cell.algo == BenchAlgo::kNcclSymm) return nccl_symm_;
  if (cell.algo == BenchAlgo::kOneShot) return one_shot_;
  return true;
}

SweepGuard::Verdict SweepGuard::OnFailure(const BenchCell& cell, bool poisoned) {
  Verdict v;
  if (cell.algo == BenchAlgo::kNccl && nccl_) {
    nccl_ = false;
    v.failures.push_back("NCCL baseline dropped for the rest of the run");
  }
  if (cell.algo == BenchAlgo::kNcclSymm && nccl_symm_) {
    nccl_symm_ = false;
    v.failures.push_back("NCCL symmetric baseline dropped for the rest of the run");
  }
  if (cell.algo == BenchAlgo::kOneShot && !poisoned && one_shot_) {
    one_shot_ = false;
    v.failures.push_back("one-shot skipped for the rest of the run");
  }
  if (poisoned) {
    v.stop = ++rebuilds_ > kMaxGroupRebuilds;
    v.rebuild_group = !v.stop;
  }
  return v;
}

}  // namespace qr::bench
