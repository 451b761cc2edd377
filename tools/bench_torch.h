// qr-bench --torch-symm: PyTorch's symmetric-memory all-reduce as a baseline
// in the same run. qr-bench runs python/bench/symm_mem_bench.py (one process
// per GPU, torch's CUDA symmetric-memory backend, multicast off; its timing
// method is qr-bench's) as a subprocess before its own sweep, on the same
// sizes, dtypes, modes and world size, then reads its CSV: the rows of
// torch.ops.symm_mem.one_shot_all_reduce_out and two_shot_all_reduce_ (as
// PyTorch 2.11 has them: pytorch/pytorch
// torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu at
// fd6c4b6ac13170d48671ab24c918282404a19f7a; the script's schema check holds
// it to their argument lists) become baseline measurements, merged into the
// table, CSV and JSON by (size, dtype, mode); bf16cast takes bf16's. The CUDA
// two-shot kernel dispatches on world size 2, 4 or 8 only
// (DISPATCH_WORLD_SIZES_NO_DEFAULT: "Not implemented for world_size=1"), so at
// world size 1 it is refused, which the run records as a note; the one-shot
// dispatch has a generic case and runs.
//
//   QR_ASSIGN_OR_RETURN(TorchRows t, ParseTorchCsv(text));
#ifndef QR_TOOLS_BENCH_TORCH_H_
#define QR_TOOLS_BENCH_TORCH_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "tools/bench_options.h"
#include "tools/bench_report.h"

namespace qr::bench {

struct TorchRows {
  std::vector<Measurement> measurements;  // ok rows of the two ops
  std::vector<std::string> refused;       // "4K fp16 graph torch-two-shot: <detail>"
  std::vector<std::string> failed;        // status failed or wrong, the same way
};

// symm_mem_bench.py's CSV (columns bytes,dtype,mode,op,status,us,...; the
// fields this reads never hold a comma). Rows of other ops (torch-nccl,
// torch-one-shot-copy) are skipped. kInvalidArgument for a missing column or
// a malformed row, naming its line.
[[nodiscard]] StatusOr<TorchRows> ParseTorchCsv(const std::string& text);

// The script's command line for o, writing its CSV to csv_path: through
// /usr/bin/env (o.torch_python found on $PATH), ops one-shot,two-shot, o's
// sizes, dtypes (bf16cast as bf16), modes, eager limit and world size.
std::vector<std::string> TorchCommand(const BenchOptions& o, const std::string& csv_path);

// Runs TorchCommand (its output goes to this process's stdout and stderr)
// and waits at most o.launch_timeout_s; then parses what it wrote. The
// script's exit status 3 (a cell failed) still gives rows; 1 or 2, a missing
// or unreadable CSV, or the timeout (the script is killed) are errors.
[[nodiscard]] StatusOr<TorchRows> RunTorchBaseline(const BenchOptions& o,
                                                   const std::string& csv_path);

// Reads a whole file: kInvalidArgument naming it when it cannot be read.
[[nodiscard]] StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_TORCH_H_
