// qr-bench: per-call time of quickreduce's all-reduce on this machine's GPUs
// (one-shot, two-shot per codec, and the policy's pick), graph-captured and
// eager, against NCCL's ncclAllReduce timed in the same run on the same
// buffers; the measured peer-store bandwidth and each row's % of the link
// limit; the QR_MIN_SIZE_TABLE this machine should use. One process drives
// world_size GPUs through peer access (kernels/gpu/local_group.h runs the
// very kernels the GPU backend launches). NCCL (or RCCL) is dlopened, so the
// binary builds and runs without it. Flags: tools/bench_options.h (--help);
// method and outputs: docs/performance.md "How to run".
//
// Robustness matters more than elegance here: the device machine's time is
// scarce, so flags and output paths are checked before any GPU work, a cell
// that fails is recorded and skipped, a poisoned group (kernel timeout) is
// rebuilt, and the CSV is written as rows come in.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "kernels/float16.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "tools/bench_options.h"
#include "tools/bench_plan.h"
#include "tools/bench_report.h"

namespace qr::bench {
namespace {


constexpr uint64_t kKernelTimeoutMs = 10000;
constexpr int kMaxGroupRebuilds = 3;

const char* const kTimingMethod =
    "CUDA/HIP events on rank 0's stream. One batch = CallsPerBatch(bytes) = clamp(256MiB/bytes, "
    "2, 50) all-reduces on every rank (graph: one replay of a captured graph per rank; eager: "
    "the launches from the host). Warm-up batch, probe batch, then 3 timed batches of "
    "clamp(20 ms / probe, 3, 200) batches each; us per call = median batch time / calls. NCCL: "
    "ncclAllReduce (sum) on the same buffers, graph-captured by one thread per GPU or launched "
    "in a ncclGroupStart/End per call. policy rows copy the timed pick of ChooseAlgorithm/"
    "EffectiveCodec under a default Config. Link limit: wire bytes per GPU / the slowest rank's "
    "peer-store GB/s with all ranks storing at once.";

// --- NCCL through dlopen: the handful of entry points we use. -------------
struct Nccl {
  using Comm = void*;
  int (*CommInitAll)(Comm*, int, const int*) = nullptr;
  int (*CommDestroy)(Comm) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  int (*GroupStart)() = nullptr;
  int (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
  int (*GetVersion)(int*) = nullptr;
  static constexpr int kFloat16 = 6, kBfloat16 = 9, kSum = 0;

  bool Load() {
    void* h = nullptr;
    for (const char* name : {"libnccl.so.2", "libnccl.so", "librccl.so.1", "librccl.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      std::fprintf(stderr, "qr-bench: NCCL/RCCL not found (%s); no baseline\n", dlerror());
      return false;
    }
    CommInitAll = reinterpret_cast<decltype(CommInitAll)>(dlsym(h, "ncclCommInitAll"));
    CommDestroy = reinterpret_cast<decltype(CommDestroy)>(dlsym(h, "ncclCommDestroy"));
    AllReduce = reinterpret_cast<decltype(AllReduce)>(dlsym(h, "ncclAllReduce"));
    GroupStart = reinterpret_cast<decltype(GroupStart)>(dlsym(h, "ncclGroupStart"));
    GroupEnd = reinterpret_cast<decltype(GroupEnd)>(dlsym(h, "ncclGroupEnd"));
    GetErrorString = reinterpret_cast<decltype(GetErrorString)>(dlsym(h, "ncclGetErrorString"));
    GetVersion = reinterpret_cast<decltype(GetVersion)>(dlsym(h, "ncclGetVersion"));
    return CommInitAll && CommDestroy && AllReduce && GroupStart && GroupEnd && GetErrorString;
  }

  // "2.28.3" (NCCL >= 2.9 encodes major*10000 + minor*100 + patch).
  std::string Version() const {
    int v = 0;
    if (GetVersion == nullptr || GetVersion(&v) != 0) return "unknown";
    return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
           std::to_string(v % 100);
  }
};

Status NcclCheck(const Nccl& n, int r, const char* what) {
  if (r == 0) return OkStatus();
  return InternalError(std::string(what) + ": " + n.GetErrorString(r));
}

Status SyncAll(const std::vector<void*>& streams) {
  for (size_t r = 0; r < streams.size(); ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(static_cast<int>(r)));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams[r]));
  }
  return OkStatus();
}

// Events on rank 0's stream around whatever enqueue() puts on every stream.
class Stopwatch {
 public:
  static StatusOr<Stopwatch> Create() {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    Stopwatch w;
    QR_ASSIGN_OR_RETURN(w.start_, gpu::EventCreate());
    QR_ASSIGN_OR_RETURN(w.stop_, gpu::EventCreate());
    return w;
  }
  Stopwatch(Stopwatch&& o) noexcept : start_(o.start_), stop_(o.stop_) { o.start_ = o.stop_ = nullptr; }
  Stopwatch(const Stopwatch&) = delete;
  ~Stopwatch() {
    if (start_ == nullptr) return;
    if (gpu::SetDevice(0).ok()) {
      gpu::EventDestroy(start_);
      gpu::EventDestroy(stop_);
    }
  }

  StatusOr<double> TimeMs(const std::vector<void*>& streams, const std::function<Status()>& enqueue) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_RETURN_IF_ERROR(gpu::EventRecord(start_, streams[0]));
    QR_RETURN_IF_ERROR(enqueue());
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_RETURN_IF_ERROR(gpu::EventRecord(stop_, streams[0]));
    QR_RETURN_IF_ERROR(SyncAll(streams));
    QR_ASSIGN_OR_RETURN(float ms, gpu::EventElapsedMs(start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  Stopwatch() = default;
  gpu::Event start_ = nullptr;
  gpu::Event stop_ = nullptr;
};

// The timing method of tools/bench_plan.h: `batch` enqueues `calls` calls on
// every rank. Returns microseconds per call.
StatusOr<double> TimeBatches(Stopwatch& watch, const std::vector<void*>& streams, int calls,
                             const std::function<Status()>& batch) {
  QR_RETURN_IF_ERROR(batch());  // warm-up
  QR_RETURN_IF_ERROR(SyncAll(streams));
  QR_ASSIGN_OR_RETURN(double probe_ms, watch.TimeMs(streams, batch));
  const int reps = RepsForTarget(probe_ms);
  std::vector<double> samples;
  for (int t = 0; t < kTimedBatches; ++t) {
    QR_ASSIGN_OR_RETURN(double ms, watch.TimeMs(streams, [&]() -> Status {
      for (int i = 0; i < reps; ++i) QR_RETURN_IF_ERROR(batch());
      return OkStatus();
    }));
    samples.push_back(ms * 1000.0 / (static_cast<double>(reps) * calls));
  }
  return Median(samples);
}

// Graphs of one capture per rank, destroyed with the object.
struct Graphs {
  std::vector<gpu::GraphExec> exec;
  ~Graphs() {
    for (size_t r = 0; r < exec.size(); ++r) {
      if (exec[r] != nullptr && gpu::SetDevice(static_cast<int>(r)).ok()) gpu::GraphDestroy(exec[r]);
    }
  }
  Status LaunchAll(const std::vector<void*>& streams) const {
    for (size_t r = 0; r < exec.size(); ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(static_cast<int>(r)));
      QR_RETURN_IF_ERROR(gpu::GraphLaunch(exec[r], streams[r]));
    }
    return OkStatus();
  }
};

// Captures enqueue(rank) on rank's stream into graphs->exec[rank]; a failure
// inside the capture still ends it, so the stream stays usable.
Status CaptureRank(int rank, void* stream, bool thread_local_mode,
                   const std::function<Status()>& enqueue, Graphs* graphs) {
  QR_RETURN_IF_ERROR(gpu::SetDevice(rank));
  QR_RETURN_IF_ERROR(thread_local_mode ? gpu::BeginCaptureThreadLocal(stream)
                                       : gpu::BeginCapture(stream));
  const Status s = enqueue();
  auto g = gpu::EndCapture(stream);
  if (!s.ok()) {
    if (g.ok()) gpu::GraphDestroy(*g);
    (void)gpu::LastError("after a failed capture");  // clear what the runtime kept
    return s;
  }
  QR_RETURN_IF_ERROR(g.status());
  graphs->exec[rank] = *g;
  return OkStatus();
}

struct DeviceBuffers {
  std::vector<void*> in, out;
  ~DeviceBuffers() {
    for (size_t r = 0; r < in.size(); ++r) {
      if (!gpu::SetDevice(static_cast<int>(r)).ok()) continue;
      gpu::Free(in[r]);
      gpu::Free(out[r]);
    }
  }
};

// Random-looking fp16 bits (never zeros, |x| <= 2; read as bf16 they are small
// finite values): a 16 MiB pattern tiled.
Status FillInputs(DeviceBuffers& b, size_t bytes, int ws) {
  const size_t pat_elems = 8u << 20;
  std::vector<uint16_t> pat(pat_elems);
  uint64_t x = 88172645463325252ull;
  for (auto& v : pat) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = kernels::FloatToHalf((static_cast<float>(x >> 40) / 16777216.0f - 0.5f) * 4.0f);
  }
  b.in.assign(ws, nullptr);
  b.out.assign(ws, nullptr);
  for (int r = 0; r < ws; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(r));
    QR_ASSIGN_OR_RETURN(b.in[r], gpu::Malloc(bytes));
    QR_ASSIGN_OR_RETURN(b.out[r], gpu::Malloc(bytes));
    for (size_t off = 0; off < bytes; off += pat_elems * 2) {
      QR_RETURN_IF_ERROR(gpu::Memcpy(static_cast<char*>(b.in[r]) + off, pat.data(),
                                     std::min(pat_elems * 2, bytes - off)));
    }
  }
  return OkStatus();
}

// Peer-store bandwidth: every rank streams into all its peers at once, then
// each rank alone. GB/s per rank = bytes leaving it / its stream's time.
StatusOr<PeerBandwidth> MeasurePeerBandwidth(const std::vector<void*>& streams, size_t bytes, int reps) {
  const int ws = static_cast<int>(streams.size());
  PeerBandwidth pb;
  pb.bytes = bytes;
  pb.reps = reps;
  // recv[p] holds one region per source rank, so sources never share lines.
  std::vector<void*> recv(ws, nullptr);
  auto free_all = [&] {
    for (int p = 0; p < ws; ++p) {
      if (recv[p] != nullptr && gpu::SetDevice(p).ok()) gpu::Free(recv[p]);
    }
  };
  auto run = [&]() -> Status {
    std::vector<kernels::PeerStoreArgs> args(ws);
    for (int p = 0; p < ws; ++p) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(p));
      QR_ASSIGN_OR_RETURN(recv[p], gpu::Malloc(bytes * ws));
    }
    for (int r = 0; r < ws; ++r) {
      QR_ASSIGN_OR_RETURN(int sms, gpu::MultiprocessorCount(r));
      args[r].blocks = std::max(sms * 2, ws);
      args[r].bytes_per_dst = bytes;
      args[r].stream = streams[r];
      for (int p = 0; p < ws; ++p) {
        if (p != r) args[r].dst[args[r].num_dst++] = static_cast<char*>(recv[p]) + r * bytes;
      }
    }
    std::vector<gpu::Event> start(ws), stop(ws);
    for (int r = 0; r < ws; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_ASSIGN_OR_RETURN(start[r], gpu::EventCreate());
      QR_ASSIGN_OR_RETURN(stop[r], gpu::EventCreate());
    }
    // One round over `ranks`, all storing together; GB/s per rank.
    auto round = [&](const std::vector<int>& ranks) -> StatusOr<std::vector<double>> {
      for (int r : ranks) {  // warm-up
        QR_RETURN_IF_ERROR(gpu::SetDevice(r));
        QR_RETURN_IF_ERROR(kernels::LaunchPeerStore(args[r]));
      }
      QR_RETURN_IF_ERROR(SyncAll(streams));
      for (int r : ranks) {
        QR_RETURN_IF_ERROR(gpu::SetDevice(r));
        QR_RETURN_IF_ERROR(gpu::EventRecord(start[r], streams[r]));
      }
      for (int i = 0; i < reps; ++i) {
        for (int r : ranks) {
          QR_RETURN_IF_ERROR(gpu::SetDevice(r));
          QR_RETURN_IF_ERROR(kernels::LaunchPeerStore(args[r]));
        }
      }
      for (int r : ranks) {
        QR_RETURN_IF_ERROR(gpu::SetDevice(r));
        QR_RETURN_IF_ERROR(gpu::EventRecord(stop[r], streams[r]));
      }
      QR_RETURN_IF_ERROR(SyncAll(streams));
      std::vector<double> gbps;
      for (int r : ranks) {
        QR_RETURN_IF_ERROR(gpu::SetDevice(r));
        QR_ASSIGN_OR_RETURN(float ms, gpu::EventElapsedMs(start[r], stop[r]));
        const double sent = static_cast<double>(bytes) * args[r].num_dst * reps;
        gbps.push_back(sent / (static_cast<double>(ms) * 1e6));
      }
      return gbps;
    };
    std::vector<int> all(ws);
    for (int r = 0; r < ws; ++r) all[r] = r;
    Status s = [&]() -> Status {
      QR_ASSIGN_OR_RETURN(pb.concurrent_gbps, round(all));
      for (int r = 0; r < ws; ++r) {
        QR_ASSIGN_OR_RETURN(std::vector<double> alone, round({r}));
        pb.alone_gbps.push_back(alone[0]);
      }
      return OkStatus();
    }();
    for (int r = 0; r < ws; ++r) {
      if (!gpu::SetDevice(r).ok()) continue;
      gpu::EventDestroy(start[r]);
      gpu::EventDestroy(stop[r]);
    }
    return s;
  };
  const Status s = run();
  free_all();
  QR_RETURN_IF_ERROR(s);
  return pb;
}

std::string Now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class Bench {
 public:
  Bench(const BenchOptions& o, std::string command_line)
      : o_(o), ws_(o.world_size), start_(std::chrono::steady_clock::now()) {
    header_.world_size = ws_;
    header_.command_line = std::move(command_line);
    header_.date = Now();
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
  Status OpenOutputs();
  Status Setup();
  Status RebuildGroup();
  Status StartNccl();
  StatusOr<double> TimeCell(const BenchCell& c);
  StatusOr<double> TimeQuickReduce(const BenchCell& c);
  StatusOr<double> TimeNccl(const BenchCell& c);
  void FlushGroup(std::vector<Measurement>& group);
  Status Finish();
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
  bool have_nccl_ = false;
  bool one_shot_ok_ = true;
  int rebuilds_ = 0;
  FILE* csv_ = nullptr;
  std::vector<Measurement> measured_;
  std::vector<BenchRow> rows_;
};

Status Bench::OpenOutputs() {
  // Fail before any GPU work when an output cannot be written.
  if (!o_.csv_path.empty()) {
    csv_ = std::fopen(o_.csv_path.c_str(), "w");
    if (csv_ == nullptr) return InvalidArgumentError("cannot write --csv " + o_.csv_path);
    std::fputs(CsvHeader().c_str(), csv_);
    std::fflush(csv_);
  }
  for (const std::string* p : {&o_.json_path, &o_.min_size_table_path}) {
    if (!p->empty()) QR_RETURN_IF_ERROR(WriteTextFile(*p, ""));
  }
  return OkStatus();
}

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
    Fail(std::string("ncclCommInitAll: ") + nccl_.GetErrorString(rc) + "; no NCCL baseline");
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
    header_.gpus.push_back(name.ok() ? *name : "unknown (" + name.status().message() + ")");
  }
  auto versions = kernels::GpuDriverAndRuntimeVersions();
  header_.driver_runtime = versions.ok() ? *versions : versions.status().message();
  std::fprintf(stderr, "qr-bench: %d x %s, %s, max_blocks %d\n", ws_, header_.gpus[0].c_str(),
               header_.driver_runtime.c_str(), header_.max_blocks);
  if (o_.peer_bandwidth) {
    std::fprintf(stderr, "qr-bench: peer-store bandwidth (%s per destination x %d reps)...\n",
                 SizeName(o_.peer_bytes).c_str(), o_.peer_reps);
    auto pb = MeasurePeerBandwidth(streams_, o_.peer_bytes, o_.peer_reps);
    if (pb.ok()) {
      header_.peer = *pb;
    } else {
      Fail("peer bandwidth: " + pb.status().ToString() + "; no link limits");
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
      QR_RETURN_IF_ERROR(group_->Launch(r, call, buffers_.in[r], buffers_.out[r]));
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
  Graphs graphs;
  graphs.exec.assign(ws_, nullptr);
  for (int r = 0; r < ws_; ++r) {
    QR_RETURN_IF_ERROR(CaptureRank(r, streams_[r], false, [&] { return enqueue_rank(r, calls); },
                                   &graphs));
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
      QR_RETURN_IF_ERROR(NcclCheck(nccl_,
                                   nccl_.AllReduce(buffers_.in[r], buffers_.out[r], count, dtype,
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
  Graphs graphs;
  graphs.exec.assign(ws_, nullptr);
  std::vector<Status> st(ws_);
  std::vector<std::thread> threads;
  for (int r = 0; r < ws_; ++r) {
    threads.emplace_back([&, r] {
      st[r] = CaptureRank(r, streams_[r], true, [&]() -> Status {
        for (int i = 0; i < calls; ++i) {
          QR_RETURN_IF_ERROR(NcclCheck(nccl_,
                                       nccl_.AllReduce(buffers_.in[r], buffers_.out[r], count,
                                                       dtype, Nccl::kSum, comms_[r], streams_[r]),
                                       "ncclAllReduce"));
        }
        return OkStatus();
      }, &graphs);
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

void Bench::FlushGroup(std::vector<Measurement>& group) {
  if (group.empty()) return;
  const auto rows = BuildRows(group, o_.regimes, ws_, header_.peer.LinkGBps());
  if (csv_ != nullptr) {
    for (const BenchRow& r : rows) std::fputs(CsvLine(r).c_str(), csv_);
    std::fflush(csv_);
  }
  std::fputs(TableLine(rows, o_.regimes).c_str(), stdout);
  std::fflush(stdout);
  rows_.insert(rows_.end(), rows.begin(), rows.end());
  group.clear();
}

Status Bench::Finish() {
  const MinSizeTable table = DeriveMinSizeTable(rows_, ws_, GpuPlatform());
  std::printf("\n%s", table.text.c_str());
  std::fflush(stdout);
  header_.wall_seconds = Elapsed();
  // Write every output even when one fails; report the first failure.
  Status s = OkStatus();
  auto keep_first = [&s](Status next) {
    if (s.ok()) s = std::move(next);
  };
  if (!o_.min_size_table_path.empty()) keep_first(WriteTextFile(o_.min_size_table_path, table.text));
  if (!o_.json_path.empty()) keep_first(WriteTextFile(o_.json_path, BenchJson(header_, rows_, table)));
  if (csv_ != nullptr) {
    if (std::fclose(csv_) != 0) keep_first(InternalError("closing " + o_.csv_path + " failed"));
    csv_ = nullptr;
  }
  return s;
}

int Bench::Run() {
  if (Status s = OpenOutputs(); !s.ok()) {
    std::fprintf(stderr, "qr-bench: %s\n", s.ToString().c_str());
    return 2;
  }
  const size_t one_shot_max = static_cast<size_t>(kernels::OneShotMaxBytes(ws_));
  const std::vector<BenchCell> cells = PlanCells(o_, one_shot_max);
  std::fprintf(stderr, "qr-bench: %zu cells, estimated %.0f s (%s)\n", cells.size(),
               EstimateRunSeconds(cells, o_), header_.command_line.c_str());
  for (const auto& n : o_.notes) std::fprintf(stderr, "qr-bench: note: %s\n", n.c_str());
  if (const std::string variant = kernels::TwoShotTimingVariant(); !variant.empty()) {
    std::fprintf(stderr, "qr-bench: TIMING VARIANT '%s': two-shot results are wrong\n",
                 variant.c_str());
  }

  Status fatal = Setup();
  if (fatal.ok()) {
    if (o_.peer_bandwidth && !header_.peer.concurrent_gbps.empty()) {
      std::printf("peer-store GB/s per GPU, all storing at once:");
      for (double g : header_.peer.concurrent_gbps) std::printf(" %.1f", g);
      std::printf("; alone:");
      for (double g : header_.peer.alone_gbps) std::printf(" %.1f", g);
      std::printf("  (link limits use %.1f)\n\n", header_.peer.LinkGBps());
    }
    std::fputs(TableHeader(o_.regimes).c_str(), stdout);
    std::fflush(stdout);
    // NCCL numbers by (bytes, mode, NCCL dtype): bf16cast reuses bf16's.
    std::map<std::tuple<size_t, BenchMode, bool>, double> nccl_us;
    std::vector<Measurement> group;
    for (size_t i = 0; i < cells.size() && fatal.ok(); ++i) {
      const BenchCell& c = cells[i];
      if (!group.empty() && (group[0].cell.bytes != c.bytes || group[0].cell.dtype != c.dtype ||
                             group[0].cell.mode != c.mode)) {
        FlushGroup(group);
      }
      const std::string label = CellLabel(c);
      std::fprintf(stderr, "[%zu/%zu %6.1fs] %s\n", i + 1, cells.size(), Elapsed(), label.c_str());
      if (c.algo == BenchAlgo::kNccl && !have_nccl_) continue;
      if (c.algo == BenchAlgo::kOneShot && !one_shot_ok_) continue;
      // bf16cast: the NCCL call is bf16's; take the number when already timed.
      if (c.dtype == BenchDType::kBf16Cast && group.empty() && have_nccl_) {
        auto it = nccl_us.find({c.bytes, c.mode, true});
        if (it != nccl_us.end()) group.push_back({{c.bytes, c.dtype, c.mode, BenchAlgo::kNccl, Codec::kFp}, it->second});
      }
      auto us = TimeCell(c);
      bool poisoned = false;
      for (int r = 0; r < ws_ && group_ != nullptr; ++r) {
        poisoned = poisoned || group_->error(r) != kernels::kGpuErrorNone;
      }
      if (us.ok() && !poisoned) {
        group.push_back({c, *us});
        measured_.push_back({c, *us});
        if (c.algo == BenchAlgo::kNccl) nccl_us[{c.bytes, c.mode, c.dtype != BenchDType::kFp16}] = *us;
        continue;
      }
      Fail(label + ": " + (us.ok() ? "a kernel reported error (timeout or abort)" : us.status().ToString()));
      (void)SyncAll(streams_);
      if (c.algo == BenchAlgo::kNccl) {
        have_nccl_ = false;
        Fail("NCCL baseline dropped for the rest of the run");
      }
      if (c.algo == BenchAlgo::kOneShot && !poisoned) {
        one_shot_ok_ = false;
        Fail("one-shot skipped for the rest of the run");
      }
      if (poisoned) {
        if (++rebuilds_ > kMaxGroupRebuilds) {
          fatal = InternalError("too many poisoned groups; stopping the sweep");
        } else if (Status s = RebuildGroup(); !s.ok()) {
          fatal = s;
        }
      }
    }
    FlushGroup(group);
  }
  if (!fatal.ok()) Fail("fatal: " + fatal.ToString());
  const Status written = Finish();
  if (!written.ok()) Fail("writing outputs: " + written.ToString());
  if (have_nccl_) {
    for (int r = 0; r < ws_; ++r) {
      if (gpu::SetDevice(r).ok()) nccl_.CommDestroy(comms_[r]);
    }
  }
  std::fprintf(stderr, "qr-bench: done in %.1f s, %zu rows, %zu failures\n", Elapsed(),
               rows_.size(), header_.failures.size());
  if (!fatal.ok() || !written.ok()) return 1;
  return header_.failures.empty() ? 0 : 3;
}

}  // namespace
}  // namespace qr::bench

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto o = qr::bench::ParseBenchArgs(args);
  if (!o.ok()) {
    std::fprintf(stderr, "qr-bench: %s\n%s", o.status().message().c_str(),
                 qr::bench::BenchUsage().c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(qr::bench::BenchUsage().c_str(), stdout);
    return 0;
  }
  std::string command_line = "qr-bench";
  for (const auto& a : args) command_line += " " + a;
  qr::bench::Bench bench(*o, command_line);
  return bench.Run();
}
