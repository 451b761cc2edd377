// qr-demo: the main job. Starts `--world-size` independent worker processes
// (fork+exec of this binary), which join one group through the broker
// (started on demand), all-reduce in every regime and both dtypes over a few
// sizes, check every result (bit-identical to the host reference of the
// algorithm the policy chose, one-shot for small sizes and two-shot above,
// and within the proven bound of the exact sum) and time the calls. Rank 0
// prints a progress line and the table. Exit code 0 only if every check of
// every rank passed.
//
//   ./bazelw run //:demo                      # 2 workers
//   ./bazelw run //:demo -- --world-size 4
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "comm/config.h"
#include "comm/policy.h"
#include "comm/quickreduce.h"
#include "common/env_vars.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/syscall.h"
#include "ipc/broker_client.h"
#include "ipc/names.h"
#include "kernels/one_shot_reference.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"
#include "kernels/types.h"
#include "tools/qr_demo_lib.h"

namespace qr::demo {
namespace {

struct Flags {
  int world_size = 2;
  std::string device = "auto";  // auto | host | gpu
  // The last size is above the world-size-2 one-shot ceiling (4 MiB), so every
  // regime also runs two-shot with its codec.
  std::vector<uint64_t> sizes = {16, 48 * 1024 + 16, 1 << 20, 8 << 20};
  std::vector<Codec> regimes;  // empty: every codec the world size allows
  std::vector<DType> dtypes = {DType::kFloat16, DType::kBFloat16};
  std::string group;
  int worker_rank = -1;  // internal: >= 0 in a worker process
};

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: qr-demo [--world-size 2|4|8] [--device auto|host|gpu]\n"
               "               [--sizes BYTES,BYTES,...] [--regimes FP,INT8,...]\n"
               "               [--dtypes fp16,bf16] [--group NAME]\n"
               "Runs all-reduces across --world-size worker processes in every regime\n"
               "and dtype, checks them, and prints a table, then what qr_should_all_reduce\n"
               "says under this environment. Honours QR_BROKER_SOCKET, QR_BROKER_AUTOSTART,\n"
               "QR_CAST_BF16_TO_FP16, QR_ONE_SHOT_MAX_KB, QR_OP_TIMEOUT_MS, QR_LOG_LEVEL,\n"
               "QR_ALLOW_SHARED_DEVICE and the policy's QR_QUANTIZATION, QR_MIN_SIZE_*, QR_MAX_SIZE_BYTES_MB.\n");
}

// Splits "a,b,c"; an empty item is kept so that the caller rejects it.
std::vector<std::string> SplitList(const std::string& value) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (true) {
    const size_t comma = value.find(',', pos);
    items.push_back(value.substr(pos, comma == std::string::npos ? comma : comma - pos));
    if (comma == std::string::npos) return items;
    pos = comma + 1;
  }
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a != "--help" && a != "-h") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "qr-demo: %s needs a value\n", a.c_str());
        return false;
      }
      value = argv[++i];
    }
    char* end = nullptr;
    if (a == "--help" || a == "-h") {
      Usage(stdout);
      std::exit(0);
    } else if (a == "--world-size") {
      f->world_size = static_cast<int>(std::strtol(value.c_str(), &end, 10));
      if (*end != '\0' || (f->world_size != 2 && f->world_size != 4 && f->world_size != 8)) {
        std::fprintf(stderr, "qr-demo: --world-size must be 2, 4 or 8, not '%s'\n", value.c_str());
        return false;
      }
    } else if (a == "--device") {
      if (value != "auto" && value != "host" && value != "gpu") {
        std::fprintf(stderr, "qr-demo: --device must be auto, host or gpu\n");
        return false;
      }
      f->device = value;
    } else if (a == "--sizes") {
      f->sizes.clear();
      size_t pos = 0;
      while (pos <= value.size()) {
        const size_t comma = value.find(',', pos);
        const std::string item =
            value.substr(pos, comma == std::string::npos ? comma : comma - pos);
        const uint64_t bytes = std::strtoull(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || bytes == 0 || bytes % 16 != 0) {
          std::fprintf(stderr, "qr-demo: size '%s' is not a positive multiple of 16 bytes\n",
                       item.c_str());
          return false;
        }
        f->sizes.push_back(bytes);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (a == "--regimes") {
      f->regimes.clear();
      for (const std::string& item : SplitList(value)) {
        const std::optional<Codec> found = CodecFromName(item);
        if (!found) {
          std::fprintf(stderr, "qr-demo: regime '%s' is not one of FP, INT8, INT6, INT4, INT3\n",
                       item.c_str());
          return false;
        }
        f->regimes.push_back(*found);
      }
    } else if (a == "--dtypes") {
      f->dtypes.clear();
      for (const std::string& item : SplitList(value)) {
        if (item != "fp16" && item != "bf16") {
          std::fprintf(stderr, "qr-demo: dtype '%s' is not fp16 or bf16\n", item.c_str());
          return false;
        }
        f->dtypes.push_back(item == "fp16" ? DType::kFloat16 : DType::kBFloat16);
      }
    } else if (a == "--group") {
      f->group = value;
    } else if (a == "--worker-rank") {
      f->worker_rank = static_cast<int>(std::strtol(value.c_str(), &end, 10));
    } else {
      std::fprintf(stderr, "qr-demo: unknown flag %s\n", a.c_str());
      Usage(stderr);
      return false;
    }
  }
  return true;
}

// Under `bazel run` the broker is in the runfiles, not beside this binary:
// point autostart at it unless the user already chose one.
void FindBrokerBinary(const std::string& self) {
  if (kEnvBrokerBin.Lookup().has_value()) return;
  std::vector<std::string> candidates;
  if (const char* rf = std::getenv("RUNFILES_DIR")) {
    candidates.push_back(std::string(rf) + "/quickreduce/ipc/broker/qr-broker");
  }
  candidates.push_back(self + ".runfiles/quickreduce/ipc/broker/qr-broker");
  candidates.push_back(self.substr(0, self.rfind('/')) + "/../ipc/broker/qr-broker");
  for (const std::string& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) {
      char resolved[PATH_MAX];
      const char* bin = ::realpath(c.c_str(), resolved) ? resolved : c.c_str();
      ::setenv(std::string(kEnvBrokerBin.name).c_str(), bin, 1);
      return;
    }
  }
}

int Launch(const Flags& f, const std::string& self) {
  const std::string group = f.group.empty() ? "qr-demo-" + std::to_string(::getpid()) : f.group;
  StatusOr<std::string> socket = ipc::ResolveSocketPath("");
  if (!socket.ok()) {
    std::fprintf(stderr, "qr-demo: %s\n", socket.status().ToString().c_str());
    return 2;
  }
  FindBrokerBinary(self);
  const bool running = ipc::BrokerConnection::Connect(*socket).ok();
  // fork+exec below: initialising the GPU runtime here is fine, the children
  // start afresh.
  const int gpus = f.device == "host" ? 0 : gpu::DeviceCount();
  // Fewer GPUs than workers: they share them only in the testing mode (the
  // workers' join reports a bad value).
  StatusOr<Config> config = LoadConfigFromEnv(gpus > 0 ? GpuPlatform() : Platform::kHost);
  const bool share = gpus > 0 && gpus < f.world_size && config.ok() && config->allow_shared_device;
  const bool enough = gpus >= f.world_size || share;
  std::string device = f.device;
  std::string why;
  if (share && device != "host") {
    why = " (" + std::to_string(f.world_size) + " ranks sharing " + std::to_string(gpus) + " GPU" +
          (gpus == 1 ? "" : "s") + ": QR_ALLOW_SHARED_DEVICE=1, a testing mode for NVIDIA MPS)";
  }
  if (device == "auto") {
    device = enough ? "gpu" : "host";
    if (!enough) {
      why = " (" + std::to_string(gpus) + " GPUs, " + std::to_string(f.world_size) + " needed)";
    }
  } else if (device == "gpu" && !enough) {
    std::fprintf(stderr,
                 "qr-demo: --device gpu needs %d GPUs, found %d (fewer are shared only with "
                 "QR_ALLOW_SHARED_DEVICE=1, under NVIDIA MPS)\n",
                 f.world_size, gpus);
    return 2;
  }
  std::printf("qr-demo: %d workers on the %s backend%s, group %s, broker %s (%s)\n", f.world_size,
              device.c_str(), why.c_str(), group.c_str(), socket->c_str(),
              running ? "running" : "starting one");
  std::fflush(stdout);

  std::vector<pid_t> pids;
  for (int r = 0; r < f.world_size; ++r) {
    std::vector<std::string> args = {self,       "--world-size",  std::to_string(f.world_size),
                                     "--device", device,          "--group",
                                     group,      "--worker-rank", std::to_string(r),
                                     "--sizes"};
    std::string sizes, regimes, dtypes;
    for (uint64_t s : f.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(s);
    for (Codec c : f.regimes) regimes += (regimes.empty() ? "" : ",") + std::string(CodecName(c));
    for (DType d : f.dtypes) dtypes += (dtypes.empty() ? "" : ",") + std::string(DTypeName(d));
    args.push_back(sizes);
    if (!regimes.empty()) args.insert(args.end(), {"--regimes", regimes});
    args.insert(args.end(), {"--dtypes", dtypes});
    StatusOr<pid_t> pid = Spawn(args);
    if (!pid.ok()) {
      std::fprintf(stderr, "qr-demo: starting worker %d: %s\n", r, pid.status().ToString().c_str());
      for (pid_t p : pids) ::kill(p, SIGKILL);
      return 2;
    }
    pids.push_back(*pid);
  }
  int failed = 0;
  for (int r = 0; r < f.world_size; ++r) {
    int status = 0;
    while (::waitpid(pids[r], &status, 0) < 0 && errno == EINTR) {
    }
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      ++failed;
      std::fprintf(stderr, "qr-demo: worker %d %s %d\n", r,
                   WIFEXITED(status) ? "exited with" : "killed by signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
  }
  if (failed) {
    std::printf("qr-demo: FAILED (%d of %d workers)\n", failed, f.world_size);
    return 1;
  }
  std::printf("qr-demo: all checks passed\n");
  return 0;
}

struct Row {
  std::string regime, dtype, size, algorithm;
  double max_error = 0, ratio = 0;
  bool exact = false;
  double us_per_call = 0;
  double gbps = 0;
};

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

// What a caller that sets nothing but QR_* variables gets: the regime that
// qr_all_reduce runs (the table above forces each regime instead) and what
// qr_should_all_reduce answers for a few sizes, from the library itself.
// The sizes straddle the AMD table's fp16 and bf16 floors at world size 2.
std::string PolicyText(const qr_comm* comm, const Config& config, int world_size) {
  const std::optional<EnvValue> regime_var = kEnvQuantization.Lookup();
  const std::string regime_source = regime_var ? regime_var->name + "=" + regime_var->value
                                               : std::string("QR_QUANTIZATION unset: the default");
  const std::string table = std::string("the built-in ") + PlatformName(config.platform) +
                            " min-size table";
  std::string floor_source = table;
  if (config.min_size_bytes_override.has_value()) {
    floor_source = "QR_MIN_SIZE_BYTES_MB";
  } else if (config.min_size_table.has_value()) {
    floor_source = "QR_MIN_SIZE_TABLE (" + table + " where it has no row)";
  }
  char line[512];
  std::snprintf(line, sizeof(line),
                "\npolicy: qr_all_reduce runs %s (%s), bf16 %s;\nfloors from %s. "
                "qr_should_all_reduce at world size %d:\n       ",
                RegimeName(config.regime), regime_source.c_str(),
                config.cast_bf16_to_fp16 ? "through fp16" : "natively", floor_source.c_str(),
                world_size);
  std::string text = line;
  const uint64_t sizes[] = {16 << 10, 256 << 10, 1 << 20, 2 << 20, 16 << 20};
  for (uint64_t bytes : sizes) {
    std::snprintf(line, sizeof(line), " %8s", FormatBytes(bytes).c_str());
    text += line;
  }
  text += "\n";
  for (const qr_dtype dtype : {QR_FLOAT16, QR_BFLOAT16}) {
    std::snprintf(line, sizeof(line), "  %-5s", dtype == QR_FLOAT16 ? "fp16" : "bf16");
    text += line;
    for (uint64_t bytes : sizes) {
      std::snprintf(line, sizeof(line), " %8s",
                    qr_should_all_reduce(comm, bytes, dtype) ? "yes" : "no");
      text += line;
    }
    text += "\n";
  }
  return text;
}

int Work(const Flags& f) {
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
  auto fail = [&](const char* what, const std::string& why) {
    std::fprintf(stderr, "\nqr-demo rank %d: %s: %s\n", rank, what, why.c_str());
    // Fail the peers now rather than leaving them to time out in the next call.
    qr_abort(comm, ("qr-demo rank " + std::to_string(rank) + " gave up at " + what).c_str());
    qr_leave(comm);
    return 3;
  };

  std::vector<Codec> codecs;
  for (Codec c : f.regimes.empty() ? std::vector<Codec>(std::begin(kAllCodecs), std::end(kAllCodecs))
                                   : f.regimes) {
    if (c != Codec::kInt3 || f.world_size == 2) codecs.push_back(c);
  }
  const int total = static_cast<int>(codecs.size() * f.dtypes.size() * f.sizes.size());
  int done = 0, failures = 0;
  std::vector<Row> rows;
  for (Codec codec : codecs) {
    for (DType dtype : f.dtypes) {
      for (uint64_t bytes : f.sizes) {
        const int64_t n = static_cast<int64_t>(bytes / 2);
        const uint64_t seed = 17 + static_cast<uint64_t>(done);
        ++done;
        // What the library runs for this call (the same policy function): the
        // check below holds it to that algorithm's reference, so a call that
        // ran the other algorithm fails it (for every codec but FP, where the
        // two are equal bit for bit).
        const Algorithm algorithm = ChooseAlgorithm(*config, bytes, f.world_size);
        const std::string label = std::string(CodecName(codec)) + " " + DTypeName(dtype) + " " +
                                  FormatBytes(bytes) + " " + AlgorithmName(algorithm);
        if (lead) {
          std::fprintf(stderr, "%s[%2d/%2d] %-22s", tty ? "\r" : "", done, total, label.c_str());
          std::fprintf(stderr, tty ? "\033[K" : "\n");
        }
        std::vector<uint16_t> in(static_cast<size_t>(n)), out;
        FillInput(dtype, rank, seed, n, in.data());
        if (Status s = buffers.Load(in); !s.ok()) return fail(label.c_str(), s.ToString());
        const qr_regime regime = static_cast<qr_regime>(codec);
        const int use_cast = dtype == DType::kBFloat16 && cast;
        auto call = [&] {
          return qr_all_reduce_ex(comm, buffers.in(), buffers.out(), static_cast<size_t>(n),
                                  static_cast<qr_dtype>(dtype), regime, use_cast, buffers.stream());
        };
        if (call() != QR_OK) return fail(label.c_str(), qr_last_error());
        if (Status s = buffers.Result(&out); !s.ok()) return fail(label.c_str(), s.ToString());
        if (qr_check(comm) != QR_OK) return fail(label.c_str(), qr_last_error());
        kernels::TwoShotParams p;
        p.world_size = f.world_size;
        p.codec = codec;
        p.dtype = dtype;
        p.cast_bf16_to_fp16 = use_cast != 0;
        p.num_elems = n;
        const Verdict v = Verify(p, seed, out.data(), algorithm);
        if (!v.ok()) {
          ++failures;
          std::fprintf(stderr, "\nqr-demo rank %d: MISMATCH %s: %s\n", rank, label.c_str(),
                       v.Describe().c_str());
        }
        // One untimed call first: it is also a barrier, so the time below does
        // not include a peer still busy verifying the previous case.
        if (call() != QR_OK) return fail(label.c_str(), qr_last_error());
        if (Status s = buffers.Sync(); !s.ok()) return fail(label.c_str(), s.ToString());
        const int iters = Iterations(bytes);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) {
          if (call() != QR_OK) return fail(label.c_str(), qr_last_error());
        }
        if (Status s = buffers.Sync(); !s.ok()) return fail(label.c_str(), s.ToString());
        if (qr_check(comm) != QR_OK) return fail(label.c_str(), qr_last_error());
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        Row row;
        row.regime = CodecName(codec);
        row.dtype = DTypeName(dtype);
        row.size = FormatBytes(bytes);
        row.algorithm = AlgorithmName(algorithm);
        row.max_error = v.bound.max_error;
        row.ratio = v.bound.max_ratio;
        row.exact = v.bit_identical;
        row.us_per_call = secs / iters * 1e6;
        row.gbps = static_cast<double>(bytes) / (secs / iters) / 1e9;
        rows.push_back(row);
      }
    }
  }
  if (lead && tty) std::fprintf(stderr, "\r\033[K");
  // Asked while the group is still healthy: leaving makes every answer no.
  const std::string policy = PolicyText(comm, *config, f.world_size);
  if (qr_leave(comm) != QR_OK) {
    std::fprintf(stderr, "qr-demo rank %d: leave: %s\n", rank, qr_last_error());
  }
  if (lead) {
    std::printf("\n%-6s %-5s %10s  %-9s %11s  %9s  %-9s %11s  %8s\n", "regime", "dtype", "size",
                "algorithm", "max |err|", "err/bound", "reference", "us/call", "GB/s");
    for (const Row& r : rows) {
      std::printf("%-6s %-5s %10s  %-9s %11.4g  %9.3f  %-9s %11.1f  %8.3f\n", r.regime.c_str(),
                  r.dtype.c_str(), r.size.c_str(), r.algorithm.c_str(), r.max_error, r.ratio,
                  r.exact ? "bit-exact" : "DIFFERS", r.us_per_call, r.gbps);
    }
    const int64_t one_shot_max =
        std::min(config->one_shot_max_bytes.value_or(DefaultOneShotMaxBytes(f.world_size)),
                 kernels::OneShotMaxElems(f.world_size) * 2);
    if (one_shot_max > 0) {
      std::printf(
          "\nalgorithm: calls up to %s run one-shot (exact 16-bit values, the regime's codec\n"
          "unused), larger ones two-shot with the regime's codec. The ceiling is %s.\n",
          FormatBytes(static_cast<uint64_t>(one_shot_max)).c_str(),
          config->one_shot_max_bytes.has_value() ? "QR_ONE_SHOT_MAX_KB's"
                                                 : "built in;\nQR_ONE_SHOT_MAX_KB overrides it");
    } else {
      std::printf("\nalgorithm: two-shot only (QR_ONE_SHOT_MAX_KB=0).\n");
    }
    std::printf(
        "err/bound: largest |output - exact sum| / proven bound over all elements "
        "(must be <= 1).\nus/call and GB/s (message bytes / time, eager calls): rank 0, "
        "%s backend, %d processes, %ld CPU cores.\n",
        on_gpu ? "GPU" : "host", f.world_size, ::sysconf(_SC_NPROCESSORS_ONLN));
    std::fputs(policy.c_str(), stdout);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace qr::demo

int main(int argc, char** argv) {
  qr::demo::Flags flags;
  if (!qr::demo::ParseFlags(argc, argv, &flags)) return 64;
  qr::Status log = qr::InitLogging("qr-demo", "warn");
  if (!log.ok()) std::fprintf(stderr, "qr-demo: %s\n", log.ToString().c_str());
  if (flags.worker_rank >= 0) return qr::demo::Work(flags);
  return qr::demo::Launch(flags, qr::SelfExecutablePath());
}
