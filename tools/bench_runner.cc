#include "tools/bench_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/status_macros.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "tools/bench_gpu.h"
#include "tools/bench_nccl.h"
#include "tools/bench_output.h"
#include "tools/bench_peer.h"
#include "tools/bench_plan.h"
#include "tools/bench_report.h"
#include "tools/bench_torch.h"

namespace qr::bench {
namespace {

constexpr uint64_t kKernelTimeoutMs = 10000;

const char* const kTimingMethod =
    "CUDA/HIP events on rank 0's stream. One batch = CallsPerBatch(bytes) = clamp(256MiB/bytes, "
    "2, 50) all-reduces on every rank (graph: one replay of a captured graph per rank; eager: "
    "the launches from the host). Warm-up batch, probe batch, then 3 timed batches of "
    "clamp(20 ms / probe, 3, 200) batches each; us per call = median batch time / calls. NCCL: "
    "ncclAllReduce (sum) on the same buffers, graph-captured by one thread per GPU or launched "
    "in a ncclGroupStart/End per call. policy rows copy the timed pick of ChooseAlgorithm/"
    "EffectiveCodec under a default Config. Link limit: wire bytes per GPU / the slowest rank's "
    "peer-store GB/s with all ranks storing at once.";

class Bench {
 public:
  Bench(const BenchOptions& o, std::string command_line)
      : o_(o), ws_(o.world_size), start_(std::chrono::steady_clock::now()) {
    header_.world_size = ws_;
    header_.command_line = std::move(command_line);
    header_.date = UtcTimestamp();
    header_.timing_method = kTimingMethod;
    header_.notes = o.notes;
  }

  // 0 all cells timed, 3 some failed, 1 fatal (outputs written in every case
  // that got as far as the sweep).
  int Run();

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  Status Setup();
  Status RebuildGroup();
  Status StartNccl();
  StatusOr<double> TimeCell(const BenchCell& c);
  // Times c into `group`, or records why not and applies the guard's
  // verdict; an error only when the sweep must stop.
  Status RunCell(const BenchCell& c, const std::string& label, SweepGuard& guard,
                 std::vector<Measurement>& group);
  StatusOr<double> TimeQuickReduce(const BenchCell& c);
  StatusOr<double> TimeNccl(const BenchCell& c);
  void Fail(const std::string& what) {
    std::fprintf(stderr, "qr-bench: %s\n", what.c_str());
    header_.failures.push_back(what);
  }

  const BenchOptions& o_;
  const int ws_;
  const std::chrono::steady_clock::time_point start_;
  BenchHeader header_;
  std::unique_ptr<kernels::LocalGroup> group_;
  std::vector<void*> streams_;
  std::unique_ptr<Stopwatch> watch_;
  DeviceBuffers buffers_;
  Nccl nccl_;
  std::vector<Nccl::Comm> comms_;
  bool have_nccl_ = false;  // comms_ initialised
  // NCCL numbers by (bytes, mode, NCCL dtype is bf16): bf16cast reuses bf16's.
  std::map<std::tuple<size_t, BenchMode, bool>, double> nccl_us_;
  BenchOutput output_{o_, header_};
};

Status Bench::RebuildGroup() {
  streams_.clear();
  watch_.reset();
  group_.reset();
  QR_ASSIGN_OR_RETURN(group_, kernels::LocalGroup::Create(ws_, o_.max_blocks));
  for (int r = 0; r < ws_; ++r) streams_.push_back(group_->stream(r));
  QR_ASSIGN_OR_RETURN(Stopwatch w, Stopwatch::Create());
  watch_ = std::make_unique<Stopwatch>(std::move(w));
  header_.max_blocks = group_->max_blocks();
  return OkStatus();
}

Status Bench::StartNccl() {
  if (!o_.nccl || !nccl_.Load()) return OkStatus();
  comms_.assign(ws_, nullptr);
  std::vector<int> devs(ws_);
  for (int r = 0; r < ws_; ++r) devs[r] = r;
  const int rc = nccl_.CommInitAll(comms_.data(), ws_, devs.data());
  if (rc != 0) {
    Fail(fmt::format("ncclCommInitAll: {}; no NCCL baseline", nccl_.GetErrorString(rc)));
    comms_.clear();
    return OkStatus();
  }
  have_nccl_ = true;
  header_.nccl_version = nccl_.Version();
  return OkStatus();
}

Status Bench::Setup() {
  QR_RETURN_IF_ERROR(RebuildGroup());
  for (int r = 0; r < ws_; ++r) {
    auto name = kernels::GpuDeviceName(r);
    header_.gpus.push_back(name.ok() ? *name
                                     : fmt::format("unknown ({})", name.status().message()));
  }
  auto versions = kernels::GpuDriverAndRuntimeVersions();
  header_.driver_runtime = versions.ok() ? *versions : versions.status().message();
  std::fputs(fmt::format("qr-bench: {} x {}, {}, max_blocks {}\n", ws_, header_.gpus[0],
                         header_.driver_runtime, header_.max_blocks)
                 .c_str(),
             stderr);
  if (o_.peer_bandwidth) {
    std::fputs(fmt::format("qr-bench: peer-store bandwidth ({} per destination x {} reps)...\n",
                           FormatBytes(o_.peer_bytes, ByteStyle::kCompact), o_.peer_reps)
                   .c_str(),
               stderr);
    auto pb = MeasurePeerBandwidth(streams_, o_.peer_bytes, o_.peer_reps);
    if (pb.ok()) {
      header_.peer = *pb;
    } else {
      Fail(fmt::format("peer bandwidth: {}; no link limits", pb.status().ToString()));
    }
    // TMA bulk copies for comparison (issue 18 item 8); never the link limits.
    for (size_t chunk : o_.peer_tma_chunks) {
      const PeerStoreChoice tma{true, chunk};
      auto t = MeasurePeerBandwidth(streams_, o_.peer_bytes, o_.peer_reps, tma);
      if (t.ok()) {
        header_.peer_tma.push_back(*t);
      } else {
        Fail(
            fmt::format("peer bandwidth, {}: {}", PeerStoreChoiceName(tma), t.status().ToString()));
      }
    }
  }
  QR_RETURN_IF_ERROR(StartNccl());
  return FillInputs(buffers_, o_.sizes.back(), ws_);
}

StatusOr<double> Bench::TimeQuickReduce(const BenchCell& c) {
  kernels::LocalCall call;
  call.format = c.dtype;
  call.codec = c.codec;
  call.count = c.bytes / 2;
  call.timeout_ms = kKernelTimeoutMs;
  call.one_shot = c.algo == BenchAlgo::kOneShot;
  const int calls = CallsPerBatch(c.bytes);
  auto enqueue_rank = [&](int r, int n) -> Status {
    for (int i = 0; i < n; ++i) {
      QR_RETURN_IF_ERROR(group_->Launch(r, call, buffers_.in[r].get(), buffers_.out[r].get()));
    }
    return OkStatus();
  };
  if (c.mode == BenchMode::kEager) {
    return TimeBatches(*watch_, streams_, calls, [&]() -> Status {
      for (int i = 0; i < calls; ++i) {
        for (int r = 0; r < ws_; ++r) QR_RETURN_IF_ERROR(enqueue_rank(r, 1));
      }
      return OkStatus();
    });
  }
  Graphs graphs(ws_);
  for (int r = 0; r < ws_; ++r) {
    QR_RETURN_IF_ERROR(CaptureRank(
        r, streams_[r], false, [&] { return enqueue_rank(r, calls); }, &graphs));
  }
  return TimeBatches(*watch_, streams_, calls, [&] { return graphs.LaunchAll(streams_); });
}

StatusOr<double> Bench::TimeNccl(const BenchCell& c) {
  const size_t count = c.bytes / 2;
  const int dtype = c.dtype == BenchDType::kFp16 ? Nccl::kFloat16 : Nccl::kBfloat16;
  const int calls = CallsPerBatch(c.bytes);
  auto one_call_all_ranks = [&]() -> Status {
    QR_RETURN_IF_ERROR(NcclCheck(nccl_, nccl_.GroupStart(), "ncclGroupStart"));
    for (int r = 0; r < ws_; ++r) {
      QR_RETURN_IF_ERROR(
          NcclCheck(nccl_,
                    nccl_.AllReduce(buffers_.in[r].get(), buffers_.out[r].get(), count, dtype,
                                    Nccl::kSum, comms_[r], streams_[r]),
                    "ncclAllReduce"));
    }
    return NcclCheck(nccl_, nccl_.GroupEnd(), "ncclGroupEnd");
  };
  // NCCL connects lazily at the first collective, which must not happen
  // inside a capture: one eager call first.
  QR_RETURN_IF_ERROR(one_call_all_ranks());
  QR_RETURN_IF_ERROR(SyncAll(streams_));
  if (c.mode == BenchMode::kEager) {
    return TimeBatches(*watch_, streams_, calls, [&]() -> Status {
      for (int i = 0; i < calls; ++i) QR_RETURN_IF_ERROR(one_call_all_ranks());
      return OkStatus();
    });
  }
  // One capturing thread per GPU (thread-local capture mode): each rank's
  // ncclAllReduce blocks nothing, and other threads' calls do not invalidate
  // the capture.
  Graphs graphs(ws_);
  std::vector<Status> st(ws_);
  std::vector<std::thread> threads;
  for (int r = 0; r < ws_; ++r) {
    threads.emplace_back([&, r] {
      st[r] = CaptureRank(
          r, streams_[r], true,
          [&]() -> Status {
            for (int i = 0; i < calls; ++i) {
              QR_RETURN_IF_ERROR(
                  NcclCheck(nccl_,
                            nccl_.AllReduce(buffers_.in[r].get(), buffers_.out[r].get(), count,
                                            dtype, Nccl::kSum, comms_[r], streams_[r]),
                            "ncclAllReduce"));
            }
            return OkStatus();
          },
          &graphs);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ws_; ++r) QR_RETURN_IF_ERROR(st[r]);
  return TimeBatches(*watch_, streams_, calls, [&] { return graphs.LaunchAll(streams_); });
}

StatusOr<double> Bench::TimeCell(const BenchCell& c) {
  if (c.algo == BenchAlgo::kNccl) return TimeNccl(c);
  return TimeQuickReduce(c);
}

Status Bench::RunCell(const BenchCell& c, const std::string& label, SweepGuard& guard,
                      std::vector<Measurement>& group) {
  auto us = TimeCell(c);
  bool poisoned = false;
  for (int r = 0; r < ws_ && group_ != nullptr; ++r) {
    poisoned = poisoned || group_->error(r) != kernels::kGpuErrorNone;
  }
  if (us.ok() && !poisoned) {
    group.push_back({c, *us});
    if (c.algo == BenchAlgo::kNccl) nccl_us_[{c.bytes, c.mode, c.dtype != BenchDType::kFp16}] = *us;
    return OkStatus();
  }
  Fail(
      fmt::format("{}: {}", label,
                  us.ok() ? "a kernel reported error (timeout or abort)" : us.status().ToString()));
  (void)SyncAll(streams_);
  const SweepGuard::Verdict v = guard.OnFailure(c, poisoned);
  for (const std::string& f : v.failures) Fail(f);
  if (v.stop) return InternalError("too many poisoned groups; stopping the sweep");
  if (v.rebuild_group) return RebuildGroup();
  return OkStatus();
}

int Bench::Run() {
  if (Status s = output_.Open(); !s.ok()) {
    std::fprintf(stderr, "qr-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  if (o_.torch_symm) {
    // Before this process touches a GPU: the torch ranks take every GPU.
    output_.AddBaselines(
        RecordTorchRows(RunTorchBaseline(o_, o_.csv_path.empty() ? "/tmp/qr-bench-torch.csv"
                                                                 : o_.csv_path + ".torch.csv"),
                        header_));
  }
  const size_t one_shot_max = static_cast<size_t>(kernels::OneShotMaxBytes(ws_));
  const std::vector<BenchCell> cells = PlanCells(o_, one_shot_max);
  std::fprintf(stderr, "qr-bench: %zu cells, estimated %.0f s (%s)\n", cells.size(),
               EstimateRunSeconds(cells, o_), header_.command_line.c_str());
  for (const auto& n : o_.notes) std::fprintf(stderr, "qr-bench: note: %s\n", n.c_str());
  std::fprintf(stderr, "qr-bench: two-shot INT4/INT8 sync: %s\n", kernels::TwoShotSyncName());
  if (const std::string variant = kernels::TwoShotTimingVariant(); !variant.empty()) {
    std::fprintf(stderr, "qr-bench: TIMING VARIANT '%s': two-shot results are wrong\n",
                 variant.c_str());
  }

  Status fatal = Setup();
  SweepGuard guard(have_nccl_);
  if (fatal.ok()) {
    output_.PrintPeerBandwidth();
    std::fputs(TableHeader(o_.regimes).c_str(), stdout);
    std::fflush(stdout);
    std::vector<Measurement> group;  // the cells of one table line
    for (size_t i = 0; i < cells.size() && fatal.ok(); ++i) {
      const BenchCell& c = cells[i];
      if (!group.empty() && (group[0].cell.bytes != c.bytes || group[0].cell.dtype != c.dtype ||
                             group[0].cell.mode != c.mode)) {
        output_.Flush(group);
      }
      const std::string label = CellLabel(c);
      std::fprintf(stderr, "[%zu/%zu %6.1fs] %s\n", i + 1, cells.size(), Elapsed(), label.c_str());
      if (!guard.ShouldTime(c)) continue;
      // bf16cast: the NCCL call is bf16's; take the number when already timed.
      if (c.dtype == BenchDType::kBf16Cast && group.empty() && guard.nccl()) {
        auto it = nccl_us_.find({c.bytes, c.mode, true});
        if (it != nccl_us_.end()) {
          group.push_back({{c.bytes, c.dtype, c.mode, BenchAlgo::kNccl, Codec::kFp}, it->second});
        }
      }
      fatal = RunCell(c, label, guard, group);
    }
    output_.Flush(group);
  }
  if (!fatal.ok()) Fail("fatal: " + fatal.ToString());
  const Status written = output_.Finish(Elapsed());
  if (!written.ok()) Fail("writing outputs: " + written.ToString());
  if (have_nccl_ && guard.nccl()) {
    for (int r = 0; r < ws_; ++r) {
      if (gpu::SetDevice(r).ok()) nccl_.CommDestroy(comms_[r]);
    }
  }
  std::fprintf(stderr, "qr-bench: done in %.1f s, %zu rows, %zu failures\n", Elapsed(),
               output_.rows().size(), header_.failures.size());
  if (!fatal.ok() || !written.ok()) return 1;
  return header_.failures.empty() ? 0 : 3;
}

}  // namespace

int RunBench(const BenchOptions& options, std::string command_line) {
  Bench bench(options, std::move(command_line));
  return bench.Run();
}

}  // namespace qr::bench
