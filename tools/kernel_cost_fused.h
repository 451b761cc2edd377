// qr-kernel-cost --fused: the fused all-reduce + residual add + RMSNorm
// (docs/fused.md) on ONE GPU, every rank of a LocalGroup on GPU 0 as the
// other modes run them, graph-captured (`iters` calls per rank in one graph,
// replayed): per (tokens, hidden, dtype) cell these timings of the same
// all-reduce,
//   all-reduce  the all-reduce alone (RankState::Launch);
//   unfused     the all-reduce, then a separate RMSNorm kernel launch
//               (LaunchResidualRmsNormEpilogue), as a caller would pair them;
//   fused       the fused request (RankState::LaunchResidualRmsNorm): one
//               kernel where the one-shot rows fit, the row-split form for
//               two-shot cells whose tokens split over the ranks, else two;
//   fused2      the fused request forced to the all-reduce and the epilogue
//               on every row (one_launch and split_rows off);
//   fused1      the one-launch kernel wherever it takes the cell, whatever
//               the policy says (one_launch_always; "-" where it does not);
// and fused / unfused and fused - all-reduce (issue 28's goals: at most 0.75
// and at most 1 us); then, with a stand-in GEMM before every call
// (kernels/gpu/stand_in_gemm.h),
//   gemm        the GEMM alone;
//   gemm+fused  the GEMM, then the fused request, plain launches;
//   gemm+pdl    the same with programmatic dependent launch (Hopper+;
//               elsewhere the same launches as gemm+fused),
// and pdl gain = gemm+fused - gemm+pdl. The algorithm is one-shot where the
// message fits the one-shot region, else two-shot FP; --two-shot makes
// every cell two-shot FP, so that fused against fused2 is the row-split
// form against the two launches (kernels/fused_split.h).
//
// This file is the host-side logic (flags, cells, outputs), tested in CI;
// kernel_cost_fused_main.cc drives the GPU.
#ifndef QR_TOOLS_KERNEL_COST_FUSED_H_
#define QR_TOOLS_KERNEL_COST_FUSED_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/types.h"
#include "tools/bench_options.h"

namespace qr::cost {

struct FusedCostOptions {
  std::vector<size_t> tokens;             // default 1,2,4,...,256
  std::vector<size_t> hiddens;            // default 4096,8192; multiples of 8
  std::vector<bench::BenchDType> dtypes;  // default fp16,bf16
  int world_size = 2;
  int reps = 7;            // timed repetitions per cell (median reported)
  int iters = 100;         // calls per repetition (one graph)
  int gemm_rounds = 4096;  // the stand-in GEMM's multiply-adds per thread
  bool gemm = true;        // time the variants with the stand-in GEMM
  bool two_shot = false;   // every cell two-shot (the row-split form's cells)
  // --mode alone: only rank 0 is launched, its SM-side cost (the issue's
  // "all-reduce alone + 1 us" goal); needs a binary of a timing variant that
  // skips the waits (no_waits or bare). Its GEMM variants time the
  // programmatic launch's gain with no peer's kernels on the GPU.
  bool alone = false;
  // --form: the one-launch kernel's thread layout in the fused and fused1
  // columns (ResidualRmsNormRequest::form).
  kernels::FusedRowForm form = kernels::FusedRowForm::kPolicy;
  // --fp8: every epilogue (fused and unfused) also writes the FP8 output.
  bool fp8 = false;
  std::string csv_path;
  bool help = false;
};

// The arguments after "--fused": --tokens, --hiddens, --dtypes (fp16,bf16),
// --world-size, --reps, --iters, --gemm-rounds, --no-gemm, --two-shot,
// --mode (shared, alone), --form (policy, chunk, lane), --fp8, --csv.
// kInvalidArgument naming the flag; --mode alone with --two-shot (the
// row-split form's collectives are not timed alone) is refused.
[[nodiscard]] StatusOr<FusedCostOptions> ParseFusedCostArgs(const std::vector<std::string>& args);
// The --help text of `tool` ("qr-kernel-cost --fused", "qr-bench --fused").
std::string FusedCostUsage(const std::string& tool = "qr-kernel-cost --fused", bool one_gpu = true);

struct FusedCostCell {
  size_t tokens = 0;
  size_t hidden = 0;
  bench::BenchDType dtype = bench::BenchDType::kFp16;
  // One-shot when tokens x hidden fits it and --two-shot is off.
  Algorithm algorithm = Algorithm::kOneShot;
};
// Hiddens, then dtypes, then tokens ascending.
std::vector<FusedCostCell> PlanFusedCells(const FusedCostOptions& o);

// Whether this binary (its TwoShotTimingVariant(), "" for the real kernels)
// can run the options: --mode alone needs "no_waits" or "bare".
// kUnsupported saying which binary to use otherwise.
[[nodiscard]] Status CheckFusedVariant(const FusedCostOptions& o, std::string_view variant);

struct FusedCostResult {
  FusedCostCell cell;
  double all_reduce_us = 0, unfused_us = 0, fused_us = 0;  // medians per call
  double fused_two_launch_us = 0;
  double fused_one_launch_us = 0;  // 0: the one-launch kernel does not take the cell
  // With the stand-in GEMM before each call (0 when not timed).
  double gemm_us = 0, gemm_fused_us = 0, gemm_fused_pdl_us = 0;
  std::string error;  // non-empty: the cell failed
};

std::string FusedTableHeader();
std::string FusedTableLine(const FusedCostResult& r);
std::string FusedCsvHeader();
std::string FusedCsvLine(const FusedCostResult& r);

// The mode's main (kernel_cost_fused_main.cc, GPU flavours only): args are
// those after "--fused". Exit 0, 1 (setup failed), 2 (bad flags), 3 (some
// cell failed; every line and the CSV still written).
int RunFusedMain(const std::vector<std::string>& args);

}  // namespace qr::cost

#endif  // QR_TOOLS_KERNEL_COST_FUSED_H_
