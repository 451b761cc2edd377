// qr-bench's outputs as a run produces them, shared by the single-process
// run (tools/bench_runner.h) and rank 0 of --launch per-gpu
// (tools/bench_worker.h): the CSV written row by row, the human table line by
// line, and at the end the nccl-tests table, the min-size table and the JSON.
// Baselines timed elsewhere (PyTorch's, tools/bench_torch.h) join each table
// line by (size, dtype, mode); bf16cast takes bf16's.
//
//   BenchOutput out(o, header);
//   QR_RETURN_IF_ERROR(out.Open());          // before any GPU work
//   out.Flush(group);                        // per (size, dtype, mode)
//   Status s = out.Finish(elapsed_seconds);
#ifndef QR_TOOLS_BENCH_OUTPUT_H_
#define QR_TOOLS_BENCH_OUTPUT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/bench_options.h"
#include "tools/bench_report.h"
#include "tools/bench_torch.h"

namespace qr::bench {

class BenchOutput {
 public:
  // `header` is written into the JSON at Finish (the run fills it meanwhile).
  BenchOutput(const BenchOptions& o, BenchHeader& header) : o_(o), header_(header) {}
  ~BenchOutput();
  BenchOutput(const BenchOutput&) = delete;
  BenchOutput& operator=(const BenchOutput&) = delete;

  // Checks every output can be written (the CSV gets its header line):
  // kInvalidArgument naming the path otherwise.
  [[nodiscard]] Status Open();

  // Measurements timed outside the sweep (PyTorch's): merged into Flush's
  // groups.
  void AddBaselines(const std::vector<Measurement>& extra);

  // The rows of one (size, dtype, mode) group: CSV lines, the table line.
  // Clears `group`.
  void Flush(std::vector<Measurement>& group);

  // The peer-store lines above the table (when measured).
  void PrintPeerBandwidth() const;

  // The nccl-tests table and the min-size table on stdout, then every output
  // file (each attempted; the first failure returned).
  [[nodiscard]] Status Finish(double wall_seconds);

  const std::vector<BenchRow>& rows() const { return rows_; }

 private:
  const BenchOptions& o_;
  BenchHeader& header_;
  FILE* csv_ = nullptr;
  std::vector<Measurement> extra_;
  std::vector<BenchRow> rows_;
};

// The torch baseline's outcome into the header: refusals as notes (a refusal
// is an answer, not a failure: the op does not take that size or world size),
// failed or wrong cells and a run that gave nothing as failures. Returns the
// measurements to pass to AddBaselines.
std::vector<Measurement> RecordTorchRows(const StatusOr<TorchRows>& rows, BenchHeader& header);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_OUTPUT_H_
