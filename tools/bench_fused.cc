#include "tools/bench_fused.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/rmsnorm_epilogue.h"
#include "kernels/gpu/stand_in_gemm.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_gpu.h"
#include "tools/kernel_cost_fused.h"

namespace qr::cost {
namespace {

using kernels::LocalCall;
using kernels::LocalGroup;
using kernels::ResidualRmsNormRequest;

enum class Variant {
  kAllReduce,
  kUnfused,
  kFused,
  kFusedTwoLaunches,
  kFusedOneLaunch,
  kGemm,
  kGemmFused,
  kGemmFusedPdl
};

// The stand-in GEMM's blocks per rank: a wave of one GPU's multiprocessors
// shared by the ranks (an H200 has 132).
constexpr int kGemmBlocks = 132;

class FusedRunner {
 public:
  FusedRunner(const FusedCostOptions& o, bool one_gpu) : o_(o), one_gpu_(one_gpu) {}

  Status Init() {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_ASSIGN_OR_RETURN(group_, LocalGroup::Create(o_.world_size, 0, one_gpu_ ? 1 : o_.world_size));
    group_->SetProgrammaticLaunch(0);
    // The unfused variant launches the epilogue right after an all-reduce
    // whose peers have not launched yet: load it first
    // (LoadResidualRmsNormEpilogue says why).
    for (int r = 0; r < o_.world_size; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(group_->device(r)));
      QR_RETURN_IF_ERROR(kernels::LoadResidualRmsNormEpilogue());
    }
    const size_t max_tokens = o_.tokens.back();
    const size_t max_hidden = *std::max_element(o_.hiddens.begin(), o_.hiddens.end());
    const size_t bytes = max_tokens * max_hidden * 2;
    for (int r = 0; r < o_.world_size; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(group_->device(r)));
      for (auto* v : {&in_, &res_, &ro_, &no_}) {
        QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::Malloc(bytes));
        // 0x3C3C: 1.06 as fp16, 0.0115 as bf16; finite sums and norms.
        QR_RETURN_IF_ERROR(gpu::Memset(b.get(), 0x3C, bytes));
        v->push_back(std::move(b));
      }
      QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer w, gpu::DeviceBuffer::Malloc(max_hidden * 2));
      QR_RETURN_IF_ERROR(gpu::Memset(w.get(), 0x3C, max_hidden * 2));
      w_.push_back(std::move(w));
      if (o_.fp8) {
        QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer q, gpu::DeviceBuffer::Malloc(bytes / 2));
        QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer scale, gpu::DeviceBuffer::Malloc(sizeof(float)));
        const float half = 0.5f;
        QR_RETURN_IF_ERROR(gpu::Memcpy(scale.get(), &half, sizeof(half)));
        q_.push_back(std::move(q));
        scale_.push_back(std::move(scale));
      }
    }
    std::vector<int> devices;
    for (int r = 0; r < o_.world_size; ++r) devices.push_back(group_->device(r));
    QR_ASSIGN_OR_RETURN(bench::GraphTimer timer, bench::GraphTimer::Create(std::move(devices)));
    timer_.emplace(std::move(timer));
    return OkStatus();
  }

  FusedCostResult Time(const FusedCostCell& cell) {
    FusedCostResult r;
    r.cell = cell;
    std::vector<std::pair<Variant, double*>> variants = {
        {Variant::kAllReduce, &r.all_reduce_us},
        {Variant::kUnfused, &r.unfused_us},
        {Variant::kFused, &r.fused_us},
        {Variant::kFusedTwoLaunches, &r.fused_two_launch_us}};
    // The one-launch kernel wherever it takes the cell, whatever the policy.
    StatusOr<bool> one =
        group_->FusedOneLaunch(Call(cell), Norm(0, cell, Variant::kFusedOneLaunch));
    if (!one.ok()) {
      r.error = one.status().message();
      return r;
    }
    if (*one) variants.push_back({Variant::kFusedOneLaunch, &r.fused_one_launch_us});
    if (o_.gemm) {
      variants.insert(variants.end(), {{Variant::kGemm, &r.gemm_us},
                                       {Variant::kGemmFused, &r.gemm_fused_us},
                                       {Variant::kGemmFusedPdl, &r.gemm_fused_pdl_us}});
    }
    for (const auto& [v, out] : variants) {
      group_->SetProgrammaticLaunch(v == Variant::kGemmFusedPdl ? 1 : 0);
      StatusOr<double> us = TimeVariant(cell, v);
      group_->SetProgrammaticLaunch(0);
      if (!us.ok()) {
        r.error = us.status().message();
        return r;
      }
      *out = *us;
    }
    return r;
  }

 private:
  static LocalCall Call(const FusedCostCell& cell) {
    return LocalCall{cell.dtype, Codec::kFp, cell.tokens * cell.hidden, 10000,
                     cell.algorithm == Algorithm::kOneShot};
  }

  ResidualRmsNormRequest Norm(int r, const FusedCostCell& cell, Variant v) const {
    ResidualRmsNormRequest norm{WorkFormatDType(cell.dtype),
                                res_[r].get(),
                                w_[r].get(),
                                ro_[r].get(),
                                no_[r].get(),
                                cell.tokens,
                                cell.hidden,
                                1e-6f,
                                o_.fp8 ? q_[r].get() : nullptr,
                                o_.fp8 ? static_cast<const float*>(scale_[r].get()) : nullptr,
                                /*one_launch=*/v != Variant::kFusedTwoLaunches,
                                /*split_rows=*/v != Variant::kFusedTwoLaunches,
                                /*one_launch_always=*/v == Variant::kFusedOneLaunch};
    norm.form = o_.form;
    return norm;
  }

  // Ranks whose kernels are launched: rank 0 alone (its SM-side cost) or all.
  int Launched() const { return o_.alone ? 1 : o_.world_size; }

  Status Enqueue(int r, const FusedCostCell& cell, Variant v) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(group_->device(r)));
    const LocalCall call = Call(cell);
    const ResidualRmsNormRequest norm = Norm(r, cell, v);
    const size_t bytes = cell.tokens * cell.hidden * 2;
    switch (v) {
      case Variant::kAllReduce:
        return group_->Launch(r, call, in_[r].get(), no_[r].get());
      case Variant::kUnfused:
        QR_RETURN_IF_ERROR(group_->Launch(r, call, in_[r].get(), no_[r].get()));
        return kernels::LaunchResidualRmsNormEpilogue(norm, group_->stream(r));
      case Variant::kFused:
      case Variant::kFusedTwoLaunches:
      case Variant::kFusedOneLaunch:
        return group_->LaunchResidualRmsNorm(r, call, in_[r].get(), norm);
      case Variant::kGemm:
        return kernels::LaunchStandInGemm(in_[r].get(), bytes, kGemmBlocks / o_.world_size,
                                          o_.gemm_rounds, group_->stream(r));
      case Variant::kGemmFused:
      case Variant::kGemmFusedPdl:
        QR_RETURN_IF_ERROR(kernels::LaunchStandInGemm(
            in_[r].get(), bytes, kGemmBlocks / o_.world_size, o_.gemm_rounds, group_->stream(r)));
        return group_->LaunchResidualRmsNorm(r, call, in_[r].get(), norm);
    }
    return InternalError("unknown variant");
  }

  StatusOr<double> TimeVariant(const FusedCostCell& cell, Variant v) {
    const int ws = Launched();
    // One eager call first: fills the launch caches outside any capture.
    for (int r = 0; r < ws; ++r) QR_RETURN_IF_ERROR(Enqueue(r, cell, v));
    QR_RETURN_IF_ERROR(group_->Synchronize());
    for (int r = 0; r < ws; ++r) {
      if (group_->error(r) != kernels::kGpuErrorNone) return InternalError("a kernel gave up");
    }
    // Rank 0 alone runs a variant that skips the waits: its peers' slots and
    // inboxes keep what it left, never the empty marks a real call needs.
    std::vector<void*> streams;
    for (int r = 0; r < ws; ++r) streams.push_back(group_->stream(r));
    return timer_->TimeUs(streams, one_gpu_ ? ws : 1, o_.iters, o_.reps,
                          [&](int r) { return Enqueue(r, cell, v); });
  }

  const FusedCostOptions& o_;
  const bool one_gpu_;
  std::unique_ptr<LocalGroup> group_;
  std::vector<gpu::DeviceBuffer> in_, res_, ro_, no_, w_;
  std::vector<gpu::DeviceBuffer> q_, scale_;  // --fp8 only
  std::optional<bench::GraphTimer> timer_;
};

}  // namespace

int RunFusedSweep(const std::vector<std::string>& args, const char* tool, bool one_gpu) {
  const auto o = ParseFusedCostArgs(args);
  if (!o.ok()) {
    std::fprintf(stderr, "%s: %s\n%s", tool, o.status().message().c_str(),
                 FusedCostUsage(tool, one_gpu).c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(FusedCostUsage(tool, one_gpu).c_str(), stdout);
    return 0;
  }
  FusedRunner runner(*o, one_gpu);
  if (Status s = CheckFusedVariant(*o, kernels::TwoShotTimingVariant()); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, s.ToString().c_str());
    return 2;
  }
  if (Status s = runner.Init(); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, s.ToString().c_str());
    return 1;
  }
  std::printf(
      "# fused all-reduce + residual + RMSNorm, world size %d, %s, %s, form %s, graph-captured, "
      "%d calls per graph\n",
      o->world_size,
      one_gpu ? "every rank on GPU 0 (kernel costs, not link measurements)" : "one GPU per rank",
      o->alone ? "mode alone (rank 0's kernels only, SM-side cost; timing variant)" : "mode shared",
      kernels::FusedRowFormName(o->form), o->iters);
  std::fputs(FusedTableHeader().c_str(), stdout);
  std::string csv = FusedCsvHeader();
  int failures = 0;
  for (const FusedCostCell& cell : PlanFusedCells(*o)) {
    const FusedCostResult r = runner.Time(cell);
    failures += r.error.empty() ? 0 : 1;
    std::fputs(FusedTableLine(r).c_str(), stdout);
    std::fflush(stdout);
    csv += FusedCsvLine(r);
  }
  if (!o->csv_path.empty()) {
    FILE* f = std::fopen(o->csv_path.c_str(), "w");
    if (f == nullptr || std::fputs(csv.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "%s: cannot write %s\n", tool, o->csv_path.c_str());
      return 1;
    }
  }
  return failures == 0 ? 0 : 3;
}

}  // namespace qr::cost
