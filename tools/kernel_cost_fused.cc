#include "tools/kernel_cost_fused.h"

#include <algorithm>
#include <cstdio>

#include "CLI/CLI.hpp"
#include "common/status_macros.h"
#include "kernels/geometry.h"
#include "tools/cli_list.h"
#include "tools/kernel_cost_options.h"

namespace qr::cost {
namespace {

StatusOr<size_t> ParseTokens(const std::string& text) {
  QR_ASSIGN_OR_RETURN(const int v, tools::ParseIntIn(text, 1, 1 << 20));
  return static_cast<size_t>(v);
}

StatusOr<size_t> ParseHidden(const std::string& text) {
  QR_ASSIGN_OR_RETURN(const int v, tools::ParseIntIn(text, 8, 1 << 20));
  if (v % 8 != 0) return InvalidArgumentError("'" + text + "' is not a multiple of 8");
  return static_cast<size_t>(v);
}

StatusOr<bool> ParseAlone(const std::string& text) {
  QR_ASSIGN_OR_RETURN(const CostMode mode, ParseCostMode(text));
  return mode == CostMode::kAlone;
}

StatusOr<kernels::FusedRowForm> ParseForm(const std::string& text) {
  for (auto form : {kernels::FusedRowForm::kPolicy, kernels::FusedRowForm::kChunkThreads,
                    kernels::FusedRowForm::kLaneThreads}) {
    if (text == kernels::FusedRowFormName(form)) return form;
  }
  return InvalidArgumentError("'" + text + "' is not one of policy, chunk, lane");
}

StatusOr<bench::BenchDType> ParseDType(const std::string& text) {
  if (text == "fp16") return bench::BenchDType::kFp16;
  if (text == "bf16") return bench::BenchDType::kBf16;
  return InvalidArgumentError("'" + text + "' is not fp16 or bf16");
}

}  // namespace

StatusOr<FusedCostOptions> ParseFusedCostArgs(const std::vector<std::string>& args) {
  FusedCostOptions o;
  CLI::App app{"qr-kernel-cost --fused", "qr-kernel-cost"};
  tools::UseToolDefaults(app);
  tools::AddListOption<size_t>(app, "--tokens", o.tokens, ParseTokens, "1,2,4,...,256");
  tools::AddListOption<size_t>(app, "--hiddens", o.hiddens, ParseHidden, "4096,8192");
  tools::AddListOption<bench::BenchDType>(app, "--dtypes", o.dtypes, ParseDType, "fp16,bf16");
  tools::AddParsedOption<int>(app, "--world-size", o.world_size, tools::ParseWorldSize, "2");
  tools::AddParsedOption<int>(
      app, "--reps", o.reps, [](const std::string& t) { return tools::ParseIntIn(t, 1, 10000); },
      "7");
  tools::AddParsedOption<int>(
      app, "--iters", o.iters, [](const std::string& t) { return tools::ParseIntIn(t, 1, 10000); },
      "100");
  tools::AddParsedOption<int>(
      app, "--gemm-rounds", o.gemm_rounds,
      [](const std::string& t) { return tools::ParseIntIn(t, 1, 1 << 24); }, "4096");
  bool no_gemm = false;
  app.add_flag("--no-gemm", no_gemm, "skip the variants with a stand-in GEMM before the call");
  app.add_flag("--two-shot", o.two_shot,
               "every cell two-shot: the row-split form where the tokens split over the ranks");
  tools::AddParsedOption<bool>(app, "--mode", o.alone, ParseAlone, "shared");
  tools::AddParsedOption<kernels::FusedRowForm>(app, "--form", o.form, ParseForm, "policy");
  app.add_flag("--fp8", o.fp8, "every epilogue also writes the FP8 e4m3 output");
  app.add_option("--csv", o.csv_path, "CSV output path");
  QR_RETURN_IF_ERROR(tools::ParseCli(app, args, &o.help));
  if (o.alone && o.two_shot) {
    return InvalidArgumentError("--mode alone: --two-shot's row-split form is timed shared only");
  }
  o.gemm = !no_gemm;
  if (o.tokens.empty()) o.tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  if (o.hiddens.empty()) o.hiddens = {4096, 8192};
  if (o.dtypes.empty()) o.dtypes = {bench::BenchDType::kFp16, bench::BenchDType::kBf16};
  std::sort(o.tokens.begin(), o.tokens.end());
  o.tokens.erase(std::unique(o.tokens.begin(), o.tokens.end()), o.tokens.end());
  return o;
}

std::string FusedCostUsage(const std::string& tool, bool one_gpu) {
  return tool +
         " [--tokens 1,2,...,256] [--hiddens 4096,8192]\n"
         "    [--dtypes fp16,bf16] [--world-size 2] [--reps 7] [--iters 100]\n"
         "    [--gemm-rounds 4096] [--no-gemm] [--two-shot] [--mode shared|alone]\n"
         "    [--form policy|chunk|lane] [--fp8] [--csv PATH]\n"
         "  The fused all-reduce + residual + RMSNorm against the same all-reduce alone and\n"
         "  followed by a separate RMSNorm kernel, as one launch and two, " +
         (one_gpu ? "every rank on\n  GPU 0" : "one GPU per\n  rank") +
         ", graph-captured; then after a stand-in GEMM, with and without\n"
         "  programmatic dependent launch. --two-shot: every cell two-shot (fused is then the\n"
         "  row-split form where the tokens split over the ranks). --mode alone: rank 0's\n"
         "  kernels only, their SM-side cost (a no_waits or bare variant's binary; with the\n"
         "  GEMM, programmatic launch without peers on the GPU).\n"
         "  --form: the one-launch kernel's threads, a thread a chunk or a thread a lane.\n"
         "  --fp8: the fused and unfused epilogues also write the FP8 e4m3 output.\n";
}

std::vector<FusedCostCell> PlanFusedCells(const FusedCostOptions& o) {
  std::vector<FusedCostCell> cells;
  for (size_t hidden : o.hiddens) {
    for (bench::BenchDType dtype : o.dtypes) {
      for (size_t tokens : o.tokens) {
        const bool fits = !o.two_shot && static_cast<int64_t>(tokens * hidden * 2) <=
                                             kernels::OneShotMaxBytes(o.world_size);
        cells.push_back({tokens, hidden, dtype, fits ? Algorithm::kOneShot : Algorithm::kTwoShot});
      }
    }
  }
  return cells;
}

Status CheckFusedVariant(const FusedCostOptions& o, std::string_view variant) {
  return CheckAloneVariant(o.alone, variant);
}

std::string FusedTableHeader() {
  return "tokens hidden dtype algorithm   all-reduce_us unfused_us fused_us fused2_us fused1_us "
         "fused/unfused fused-allreduce_us   gemm_us gemm+fused_us gemm+pdl_us pdl_gain_us\n";
}

std::string FusedTableLine(const FusedCostResult& r) {
  char line[320];
  if (!r.error.empty()) {
    std::snprintf(line, sizeof(line), "%6zu %6zu %-5s %-9s   FAILED: %s\n", r.cell.tokens,
                  r.cell.hidden, bench::BenchDTypeName(r.cell.dtype),
                  AlgorithmName(r.cell.algorithm), r.error.c_str());
    return line;
  }
  char one[16] = "-";
  if (r.fused_one_launch_us > 0) std::snprintf(one, sizeof(one), "%.2f", r.fused_one_launch_us);
  std::snprintf(line, sizeof(line),
                "%6zu %6zu %-5s %-9s   %13.2f %10.2f %8.2f %9.2f %9s %13.3f %18.2f   %7.2f %13.2f "
                "%11.2f %11.2f\n",
                r.cell.tokens, r.cell.hidden, bench::BenchDTypeName(r.cell.dtype),
                AlgorithmName(r.cell.algorithm), r.all_reduce_us, r.unfused_us, r.fused_us,
                r.fused_two_launch_us, one, r.unfused_us > 0 ? r.fused_us / r.unfused_us : 0.0,
                r.fused_us - r.all_reduce_us, r.gemm_us, r.gemm_fused_us, r.gemm_fused_pdl_us,
                r.gemm_fused_us - r.gemm_fused_pdl_us);
  return line;
}

std::string FusedCsvHeader() {
  return "tokens,hidden,dtype,algorithm,all_reduce_us,unfused_us,fused_us,fused_two_launch_us,"
         "fused_one_launch_us,gemm_us,gemm_fused_us,gemm_fused_pdl_us,error\n";
}

std::string FusedCsvLine(const FusedCostResult& r) {
  char line[320];
  std::snprintf(line, sizeof(line), "%zu,%zu,%s,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,",
                r.cell.tokens, r.cell.hidden, bench::BenchDTypeName(r.cell.dtype),
                AlgorithmName(r.cell.algorithm), r.all_reduce_us, r.unfused_us, r.fused_us,
                r.fused_two_launch_us, r.fused_one_launch_us, r.gemm_us, r.gemm_fused_us,
                r.gemm_fused_pdl_us);
  std::string error = r.error;
  std::replace(error.begin(), error.end(), ',', ';');
  return line + error + "\n";
}

}  // namespace qr::cost
