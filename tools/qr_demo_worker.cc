#include "tools/qr_demo_worker.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "comm/config.h"
#include "comm/policy.h"
#include "comm/quickreduce.h"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "kernels/types.h"
#include "tools/qr_demo_lib.h"
#include "tools/qr_demo_report.h"

namespace qr::demo {
namespace {

// Deterministic on every rank (calls are collective): small messages repeat
// more so their time per call is measurable.
int Iterations(uint64_t bytes) {
  const uint64_t target = 16ull << 20;
  return static_cast<int>(std::min<uint64_t>(100, std::max<uint64_t>(2, target / bytes)));
}

// Where a worker's buffers live: host memory for the host backend, device
// memory (plus a stream) on this rank's GPU for the GPU backend.
class Buffers {
 public:
  explicit Buffers(bool on_gpu) : on_gpu_(on_gpu) {}
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  ~Buffers() { Release(); }

  Status Init(int device) {
    if (!on_gpu_) return OkStatus();
    QR_RETURN_IF_ERROR(gpu::SetDevice(device));
    QR_ASSIGN_OR_RETURN(stream_, gpu::StreamCreate());
    return OkStatus();
  }
  // Sets up in/out for `in_host`'s contents.
  Status Load(const std::vector<uint16_t>& in_host) {
    Release();
    bytes_ = in_host.size() * sizeof(uint16_t);
    if (!on_gpu_) {
      host_in_ = in_host;
      host_out_.assign(in_host.size(), 0);
      in_ = host_in_.data();
      out_ = host_out_.data();
      return OkStatus();
    }
    QR_ASSIGN_OR_RETURN(in_, gpu::Malloc(bytes_));
    QR_ASSIGN_OR_RETURN(out_, gpu::Malloc(bytes_));
    // On the all-reduce's stream: a synchronous copy from pageable memory may
    // return before its DMA lands, and our stream does not wait for the
    // default stream.
    QR_RETURN_IF_ERROR(gpu::MemcpyAsync(in_, in_host.data(), bytes_, stream_));
    return gpu::StreamSynchronize(stream_);
  }
  // Waits for the stream (GPU) and copies out to the host.
  Status Result(std::vector<uint16_t>* out_host) {
    out_host->resize(bytes_ / sizeof(uint16_t));
    if (!on_gpu_) {
      *out_host = host_out_;
      return OkStatus();
    }
    QR_RETURN_IF_ERROR(gpu::MemcpyAsync(out_host->data(), out_, bytes_, stream_));
    return gpu::StreamSynchronize(stream_);
  }
  Status Sync() { return on_gpu_ ? gpu::StreamSynchronize(stream_) : OkStatus(); }

  void* in() const { return in_; }
  void* out() const { return out_; }
  void* stream() const { return stream_; }

 private:
  void Release() {
    if (on_gpu_) {
      if (in_ != nullptr) gpu::Free(in_);
      if (out_ != nullptr) gpu::Free(out_);
    }
    in_ = out_ = nullptr;
  }

  const bool on_gpu_;
  gpu::Stream stream_ = nullptr;
  void* in_ = nullptr;
  void* out_ = nullptr;
  size_t bytes_ = 0;
  std::vector<uint16_t> host_in_, host_out_;
};

// One (codec, dtype, size) on a joined group.
struct Case {
  Codec codec;
  DType dtype;
  uint64_t bytes;
  uint64_t seed;  // of every rank's input
  bool cast;      // bf16 through fp16
  // What the library runs for this call (the same policy function): the
  // check holds it to that algorithm's reference, so a call that ran the
  // other algorithm fails it (for every codec but FP, where the two are
  // equal bit for bit).
  Algorithm algorithm;
};

// Runs, checks and times `c`. A failed call or copy is an error whose
// message is what to print; a mismatch is a row that did not pass.
StatusOr<DemoRow> RunCase(qr_comm* comm, Buffers& buffers, const DemoFlags& f, int rank,
                          const Case& c, const std::string& label) {
  const int64_t n = static_cast<int64_t>(c.bytes / 2);
  auto qr_failed = [] { return InternalError(qr_last_error()); };
  auto failed = [](const Status& s) { return InternalError(s.ToString()); };
  std::vector<uint16_t> in(static_cast<size_t>(n)), out;
  FillInput(c.dtype, rank, c.seed, n, in.data());
  if (Status s = buffers.Load(in); !s.ok()) return failed(s);
  const int use_cast = c.dtype == DType::kBFloat16 && c.cast;
  auto call = [&] {
    return qr_all_reduce_ex(comm, buffers.in(), buffers.out(), static_cast<size_t>(n),
                            static_cast<qr_dtype>(c.dtype), static_cast<qr_regime>(c.codec),
                            use_cast, buffers.stream());
  };
  if (call() != QR_OK) return qr_failed();
  if (Status s = buffers.Result(&out); !s.ok()) return failed(s);
  if (qr_check(comm) != QR_OK) return qr_failed();
  kernels::TwoShotParams p;
  p.world_size = f.world_size;
  p.codec = c.codec;
  p.dtype = c.dtype;
  p.cast_bf16_to_fp16 = use_cast != 0;
  p.num_elems = n;
  const Verdict v = Verify(p, c.seed, out.data(), c.algorithm);
  if (!v.ok()) {
    std::fputs(
        fmt::format("\nqr-demo rank {}: MISMATCH {}: {}\n", rank, label, v.Describe()).c_str(),
        stderr);
  }
  // One untimed call first: it is also a barrier, so the time below does
  // not include a peer still busy verifying the previous case.
  if (call() != QR_OK) return qr_failed();
  if (Status s = buffers.Sync(); !s.ok()) return failed(s);
  const int iters = Iterations(c.bytes);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (call() != QR_OK) return qr_failed();
  }
  if (Status s = buffers.Sync(); !s.ok()) return failed(s);
  if (qr_check(comm) != QR_OK) return qr_failed();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DemoRow row;
  row.regime = CodecName(c.codec);
  row.dtype = DTypeName(c.dtype);
  row.size = FormatBytes(c.bytes);
  row.algorithm = AlgorithmName(c.algorithm);
  row.max_error = v.bound.max_error;
  row.ratio = v.bound.max_ratio;
  row.exact = v.bit_identical;
  row.passed = v.ok();
  row.us_per_call = secs / iters * 1e6;
  row.gbps = static_cast<double>(c.bytes) / (secs / iters) / 1e9;
  return row;
}

}  // namespace

int Work(const DemoFlags& f) {
  const int rank = f.worker_rank;
  const bool lead = rank == 0;
  const bool tty = ::isatty(STDERR_FILENO);
  const bool on_gpu = f.device == "gpu";
  // Rank r on GPU r % GPUs: its own where there are enough (Launch checked).
  const int gpus = on_gpu ? gpu::DeviceCount() : 0;
  const int device = gpus > 0 ? rank % gpus : rank;
  Buffers buffers(on_gpu);
  if (Status s = buffers.Init(device); !s.ok()) {
    std::fprintf(stderr, "qr-demo rank %d: GPU %d: %s\n", rank, device, s.ToString().c_str());
    return 2;
  }
  qr_join_options o;
  std::memset(&o, 0, sizeof(o));
  o.group = f.group.c_str();
  o.rank = rank;
  o.world_size = f.world_size;
  o.device = on_gpu ? device : QR_DEVICE_HOST;
  qr_comm* comm = nullptr;
  if (qr_join(&o, &comm) != QR_OK) {
    std::fprintf(stderr, "qr-demo rank %d: join: %s\n", rank, qr_last_error());
    return 2;
  }
  // The join read the same configuration for the same platform, so it parses.
  const Platform platform = on_gpu ? GpuPlatform() : Platform::kHost;
  StatusOr<Config> config = LoadConfigFromEnv(platform);
  if (!config.ok()) {
    std::fprintf(stderr, "qr-demo rank %d: %s\n", rank, config.status().ToString().c_str());
    qr_leave(comm);
    return 2;
  }
  const bool cast = config->cast_bf16_to_fp16;
  if (lead) {
    std::printf(
        "qr-demo: joined (%s backend%s); checking every output against the host\n"
        "         reference (bit for bit) and the exact sum (proven codec bound)\n",
        on_gpu ? "GPU" : "host", cast ? ", bf16 reduced through fp16" : "");
    std::fflush(stdout);
  }

  std::vector<Codec> codecs;
  for (Codec c : f.regimes.empty()
                     ? std::vector<Codec>(std::begin(kAllCodecs), std::end(kAllCodecs))
                     : f.regimes) {
    if (c != Codec::kInt3 || f.world_size == 2) codecs.push_back(c);
  }
  const int total = static_cast<int>(codecs.size() * f.dtypes.size() * f.sizes.size());
  int done = 0, failures = 0;
  std::vector<DemoRow> rows;
  for (Codec codec : codecs) {
    for (DType dtype : f.dtypes) {
      for (uint64_t bytes : f.sizes) {
        const Case c{
            codec, dtype,
            bytes, 17 + static_cast<uint64_t>(done),
            cast,  ChooseAlgorithm(*config, bytes, f.world_size, WorkFormatOf(dtype, cast), codec)};
        ++done;
        const std::string label = fmt::format("{} {} {} {}", CodecName(codec), DTypeName(dtype),
                                              FormatBytes(bytes), AlgorithmName(c.algorithm));
        if (lead) {
          std::fprintf(stderr, "%s[%2d/%2d] %-22s", tty ? "\r" : "", done, total, label.c_str());
          std::fprintf(stderr, tty ? "\033[K" : "\n");
        }
        StatusOr<DemoRow> row = RunCase(comm, buffers, f, rank, c, label);
        if (!row.ok()) {
          std::fprintf(stderr, "\nqr-demo rank %d: %s: %s\n", rank, label.c_str(),
                       row.status().message().c_str());
          // Fail the peers now rather than leaving them to time out in the next call.
          qr_abort(comm, fmt::format("qr-demo rank {} gave up at {}", rank, label).c_str());
          qr_leave(comm);
          return 3;
        }
        if (!row->passed) ++failures;
        rows.push_back(*row);
      }
    }
  }
  if (lead && tty) std::fprintf(stderr, "\r\033[K");
  // Asked before qr_leave, which frees comm.
  const std::string policy = PolicyText(comm, *config, f.world_size);
  if (qr_leave(comm) != QR_OK) {
    std::fprintf(stderr, "qr-demo rank %d: leave: %s\n", rank, qr_last_error());
  }
  if (lead) {
    std::fputs(ResultTable(rows, *config, f.world_size, on_gpu).c_str(), stdout);
    std::fputs(policy.c_str(), stdout);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace qr::demo
