#include "tools/bench_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/quickreduce.h"
#include "common/status_macros.h"
#include "kernels/geometry.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_worker_internal.h"

namespace qr::bench {
namespace internal {

const char* const kPerGpuTimingMethod =
    "--launch per-gpu: one process per GPU; CUDA/HIP events on each rank's own stream around "
    "each batch, every batch started after a barrier on the launcher's side channel. One batch "
    "= CallsPerBatch(bytes) = clamp(256MiB/bytes, 2, 50) all-reduces (graph: one replay of a "
    "graph captured in thread-local mode, which must have nodes; eager: the calls from the "
    "host). Warm-up batch, probe batch, then 3 timed batches of clamp(20 ms / rank 0's probe, "
    "3, 200) batches each; us per call = the slowest rank's median batch time / calls. "
    "quickreduce: qr_all_reduce_ex through the broker's group (two groups: one-shot ceiling 0 "
    "for two-shot cells, the one-shot region for one-shot cells). NCCL: ncclAllReduce (sum) on "
    "plain buffers; NCCL symmetric: on ncclMemAlloc buffers registered with "
    "ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC). policy rows copy the timed pick of "
    "ChooseAlgorithm/EffectiveCodec under a default Config.";

Status Worker::Call(const BenchCell& c) {
  const size_t count = c.bytes / 2;
  void* in = buffers_.in[0].get();
  void* out = buffers_.out[0].get();
  if (c.algo == BenchAlgo::kNccl || c.algo == BenchAlgo::kNcclSymm) {
    if (c.algo == BenchAlgo::kNcclSymm) {
      in = symm_in_;
      out = symm_out_;
    }
    const int dtype = c.dtype == BenchDType::kFp16 ? Nccl::kFloat16 : Nccl::kBfloat16;
    return NcclCheck(nccl_,
                     nccl_.AllReduce(in, out, count, dtype, Nccl::kSum, comm_, stream_.get()),
                     "ncclAllReduce");
  }
  const bool one = c.algo == BenchAlgo::kOneShot;
  const qr_status st = qr_all_reduce_ex(one ? one_shot_ : two_shot_, in, out, count,
                                        c.dtype == BenchDType::kFp16 ? QR_FLOAT16 : QR_BFLOAT16,
                                        static_cast<qr_regime>(one ? Codec::kFp : c.codec),
                                        c.dtype == BenchDType::kBf16Cast ? 1 : 0, stream_.get());
  if (st != QR_OK) return InternalError(fmt::format("qr_all_reduce_ex: {}", qr_last_error()));
  return OkStatus();
}

// Events around enqueue() on this rank's stream, started after a barrier;
// every rank's success agreed before the result is used.
StatusOr<double> Worker::TimeMs(const std::function<Status()>& enqueue) {
  QR_RETURN_IF_ERROR(coord_.Barrier());
  Status s = gpu::EventRecord(ev_start_.get(), stream_.get());
  if (s.ok()) s = enqueue();
  if (s.ok()) s = gpu::EventRecord(ev_stop_.get(), stream_.get());
  if (s.ok()) s = gpu::StreamSynchronize(stream_.get());
  float ms = 0;
  if (s.ok()) {
    auto e = gpu::EventElapsedMs(ev_start_.get(), ev_stop_.get());
    s = e.status();
    if (e.ok()) ms = *e;
  }
  QR_RETURN_IF_ERROR(coord_.AllOk(s));
  return static_cast<double>(ms);
}

StatusOr<Measurement> Worker::TimeCell(const BenchCell& c) {
  const int calls = CallsPerBatch(c.bytes);
  // One eager call first on every rank (NCCL connects lazily, which must not
  // happen inside a capture; a call that fails shows here).
  Status s = Call(c);
  if (s.ok()) s = gpu::StreamSynchronize(stream_.get());
  QR_RETURN_IF_ERROR(coord_.AllOk(s));
  Measurement m;
  m.cell = c;
  std::function<Status()> batch;
  gpu::ScopedGraph graph;
  if (c.mode == BenchMode::kGraph) {
    auto g = CaptureStream(device_, stream_.get(), /*thread_local_mode=*/true, [&]() -> Status {
      for (int i = 0; i < calls; ++i) QR_RETURN_IF_ERROR(Call(c));
      return OkStatus();
    });
    s = g.status();
    if (g.ok() && g->nodes() == 0) s = InternalError("the captured graph is empty (no nodes)");
    if (g.ok()) graph = std::move(*g);
    QR_RETURN_IF_ERROR(coord_.AllOk(s));
    QR_ASSIGN_OR_RETURN(const std::vector<std::string> nodes,
                        coord_.AllGather(std::to_string(graph.nodes())));
    m.graph_nodes = std::stoi(nodes[0]);
    for (const std::string& n : nodes) m.graph_nodes = std::min(m.graph_nodes, std::stoi(n));
    batch = [&] { return graph.Launch(stream_.get()); };
  } else {
    batch = [&]() -> Status {
      for (int i = 0; i < calls; ++i) QR_RETURN_IF_ERROR(Call(c));
      return OkStatus();
    };
  }
  QR_RETURN_IF_ERROR(TimeMs(batch).status());  // warm-up
  QR_ASSIGN_OR_RETURN(const double probe_ms, TimeMs(batch));
  QR_ASSIGN_OR_RETURN(const std::string reps_text,
                      coord_.Broadcast(std::to_string(RepsForTarget(probe_ms))));
  const int reps = std::stoi(reps_text);
  std::vector<double> samples;
  for (int t = 0; t < kTimedBatches; ++t) {
    QR_ASSIGN_OR_RETURN(const double ms, TimeMs([&]() -> Status {
                          for (int i = 0; i < reps; ++i) QR_RETURN_IF_ERROR(batch());
                          return OkStatus();
                        }));
    samples.push_back(ms * 1000.0 / (static_cast<double>(reps) * calls));
  }
  // The collective ends with its slowest rank.
  QR_ASSIGN_OR_RETURN(const std::vector<std::string> all,
                      coord_.AllGather(fmt::format("{:.6f}", Median(samples))));
  for (const std::string& us : all) m.us = std::max(m.us, std::stod(us));
  return m;
}

int Worker::Run() {
  if (lead()) {
    if (Status s = output_.Open(); !s.ok()) {
      std::fprintf(stderr, "qr-bench: %s\n", s.ToString().c_str());
      (void)coord_.AllOk(s);
      return 2;
    }
  }
  // Fatal unless every rank has its GPU.
  if (Status s = coord_.AllOk(SetupGpu()); !s.ok()) {
    Fail("fatal: " + s.ToString());
    if (lead()) (void)output_.Finish(Elapsed());
    return 1;
  }
  {
    auto name = kernels::GpuDeviceName(device_);
    auto names = coord_.AllGather(name.ok() ? *name : "unknown");
    if (names.ok()) header_.gpus = *names;
    auto versions = kernels::GpuDriverAndRuntimeVersions();
    header_.driver_runtime = versions.ok() ? *versions : versions.status().message();
  }
  if (lead()) {
    std::fprintf(stderr, "qr-bench: --launch per-gpu, %d x %s%s, %s\n", ws_,
                 header_.gpus.empty() ? "?" : header_.gpus[0].c_str(),
                 shared_ ? " (ranks sharing GPUs)" : "", header_.driver_runtime.c_str());
  }
  if (o_.one_shot || o_.two_shot) {
    Status joined = coord_.AllOk(JoinQuickReduce());
    have_qr_ = joined.ok();
    if (!joined.ok()) Fail("quickreduce: " + joined.ToString() + "; no quickreduce cells");
  }
  if (o_.nccl && shared_) {
    Note("NCCL baselines skipped: NCCL refuses two ranks on one GPU");
  } else if (o_.nccl) {
    if (Status s = StartNccl(); !s.ok()) Fail(s.ToString() + "; no NCCL baselines");
    if (have_nccl_ && o_.nccl_symm) {
      if (Status s = StartNcclSymmetric(); !s.ok()) {
        Fail(s.ToString() + "; no NCCL symmetric baseline");
      }
    }
  }
  LoadTorchRows();
  std::vector<BenchCell> cells;
  for (const BenchCell& c : PlanCells(o_, static_cast<size_t>(kernels::OneShotMaxBytes(ws_)))) {
    if (IsBaseline(c.algo) || have_qr_) cells.push_back(c);
  }
  if (lead()) {
    std::fprintf(stderr, "qr-bench: %zu cells, estimated %.0f s (%s)\n", cells.size(),
                 EstimateRunSeconds(cells, o_), header_.command_line.c_str());
    std::fputs(TableHeader(o_.regimes).c_str(), stdout);
    std::fflush(stdout);
  }
  SweepGuard guard(have_nccl_, have_symm_);
  // NCCL numbers by (bytes, mode, algo): bf16cast reuses bf16's.
  std::map<std::tuple<size_t, BenchMode, BenchAlgo>, Measurement> bf16_baselines;
  std::vector<Measurement> group;
  int graphs = 0, min_nodes = -1;
  Status fatal = OkStatus();
  for (size_t i = 0; i < cells.size() && fatal.ok(); ++i) {
    const BenchCell& c = cells[i];
    if (!group.empty() && (group[0].cell.bytes != c.bytes || group[0].cell.dtype != c.dtype ||
                           group[0].cell.mode != c.mode)) {
      if (lead()) output_.Flush(group);
      group.clear();
    }
    const std::string label = CellLabel(c);
    if (lead()) {
      std::fprintf(stderr, "[%zu/%zu %6.1fs] %s\n", i + 1, cells.size(), Elapsed(), label.c_str());
    }
    if (!guard.ShouldTime(c)) continue;
    if (c.dtype == BenchDType::kBf16Cast && group.empty()) {
      for (BenchAlgo a : {BenchAlgo::kNccl, BenchAlgo::kNcclSymm}) {
        auto it = bf16_baselines.find({c.bytes, c.mode, a});
        if (it == bf16_baselines.end()) continue;
        Measurement copy = it->second;
        copy.cell.dtype = BenchDType::kBf16Cast;
        group.push_back(copy);
      }
    }
    StatusOr<Measurement> m = TimeCell(c);
    if (m.ok()) {
      group.push_back(*m);
      if (IsBaseline(c.algo) && c.dtype == BenchDType::kBf16) {
        bf16_baselines[{c.bytes, c.mode, c.algo}] = *m;
      }
      if (m->graph_nodes >= 0) {
        ++graphs;
        min_nodes = min_nodes < 0 ? m->graph_nodes : std::min(min_nodes, m->graph_nodes);
      }
      continue;
    }
    Fail(fmt::format("{}: {}", label, m.status().ToString()));
    (void)gpu::StreamSynchronize(stream_.get());
    // A lost side channel (a rank died, the launcher stopped) ends the run.
    if (m.status().code() == StatusCode::kUnavailable) fatal = m.status();
    const SweepGuard::Verdict v = guard.OnFailure(c, /*poisoned=*/false);
    for (const std::string& f : v.failures) Fail(f);
  }
  if (lead()) {
    output_.Flush(group);
    if (graphs > 0) {
      Note(fmt::format("{} graph-mode cells captured; the smallest graph had {} nodes", graphs,
                       min_nodes));
    }
  }
  if (!fatal.ok()) Fail("fatal: " + fatal.ToString());
  if (fatal.ok()) Teardown();
  if (!lead()) return fatal.ok() ? 0 : 1;
  const Status written = output_.Finish(Elapsed());
  if (!written.ok()) Fail("writing outputs: " + written.ToString());
  std::fprintf(stderr, "qr-bench: done in %.1f s, %zu rows, %zu failures\n", Elapsed(),
               output_.rows().size(), header_.failures.size());
  if (!fatal.ok() || !written.ok()) return 1;
  return header_.failures.empty() ? 0 : 3;
}

}  // namespace internal

int RunWorker(const BenchOptions& o, std::string command_line) {
  StatusOr<CoordClient> coord = CoordClient::Connect(o.coord_path, o.worker_rank);
  if (!coord.ok()) {
    std::fprintf(stderr, "qr-bench rank %d: %s\n", o.worker_rank,
                 coord.status().ToString().c_str());
    return 1;
  }
  internal::Worker w(o, std::move(*coord), std::move(command_line));
  return w.Run();
}

}  // namespace qr::bench
