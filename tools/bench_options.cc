#include "tools/bench_options.h"

#include <fmt/format.h>

#include <algorithm>

#include "CLI/CLI.hpp"
#include "common/bytes.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "tools/cli_list.h"

namespace qr::bench {
namespace {

using tools::AddListOption;
using tools::AddParsedOption;

constexpr const char* kDefaultSizes = "4K,16K,64K,256K,1M,2M,4M,16M,64M,256M,1G";
constexpr const char* kQuickSizes = "4K,64K,256K,1M,4M,16M,64M";
constexpr const char* kAllRegimes = "FP,INT8,INT6,INT4,INT3";

enum class Algo { kOneShot, kTwoShot };

StatusOr<size_t> ParseMessageSize(const std::string& text) {
  QR_ASSIGN_OR_RETURN(uint64_t b, ParseBytes(text));
  if (b == 0 || !IsWholeMessageUnits(b) || b > kBenchMaxBytes) {
    return InvalidArgumentError(
        fmt::format("{} must be a positive multiple of 16 bytes, at most 4G", text));
  }
  return static_cast<size_t>(b);
}

StatusOr<Codec> ParseRegime(const std::string& text) {
  const std::optional<Codec> c = CodecFromName(text);
  if (!c)
    return InvalidArgumentError(fmt::format("'{}' is not one of FP, INT8, INT6, INT4, INT3", text));
  return *c;
}

StatusOr<BenchDType> ParseDType(const std::string& text) {
  for (BenchDType d : {BenchDType::kFp16, BenchDType::kBf16, BenchDType::kBf16Cast}) {
    if (text == BenchDTypeName(d)) return d;
  }
  return InvalidArgumentError(fmt::format("'{}' is not one of fp16, bf16, bf16cast", text));
}

StatusOr<BenchMode> ParseMode(const std::string& text) {
  for (BenchMode m : {BenchMode::kGraph, BenchMode::kEager}) {
    if (text == BenchModeName(m)) return m;
  }
  return InvalidArgumentError(fmt::format("'{}' is not one of graph, eager", text));
}

StatusOr<BenchLaunch> ParseLaunch(const std::string& text) {
  for (BenchLaunch l : {BenchLaunch::kSingle, BenchLaunch::kPerGpu}) {
    if (text == BenchLaunchName(l)) return l;
  }
  return InvalidArgumentError(fmt::format("'{}' is not one of single, per-gpu", text));
}

// 1 as well as ValidateWorldSize's 2, 4 and 8: Finish allows it with
// --launch per-gpu only.
StatusOr<int> ParseBenchWorldSize(const std::string& text) {
  if (text == "1") return 1;
  return tools::ParseWorldSize(text);
}

StatusOr<Algo> ParseAlgo(const std::string& text) {
  if (text == "one-shot") return Algo::kOneShot;
  if (text == "two-shot") return Algo::kTwoShot;
  return InvalidArgumentError(fmt::format("'{}' is not one of one-shot, two-shot", text));
}

// Sorted, each once: canonical order whatever the command line said, so
// tables read the same, and bf16 is timed before bf16cast so that its NCCL
// number can be reused.
template <typename T>
void SortUnique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// What the command line said, before the defaults that depend on --quick.
struct Parsed {
  BenchOptions o;
  std::vector<Algo> algos;
  bool no_nccl = false;
  bool no_nccl_symm = false;
  bool no_peer_bandwidth = false;
  CLI::Option* sizes = nullptr;
  CLI::Option* regimes = nullptr;
  CLI::Option* dtypes = nullptr;
  CLI::Option* modes = nullptr;
  CLI::Option* algos_flag = nullptr;
  CLI::Option* peer_bytes = nullptr;
  CLI::Option* peer_tma_chunks = nullptr;
  CLI::Option* peer_bandwidth_flag = nullptr;
};

void DefineFlags(CLI::App& app, Parsed& p) {
  tools::UseToolDefaults(app);
  BenchOptions& o = p.o;
  p.sizes = AddListOption<size_t>(
      app, "--sizes", o.sizes, ParseMessageSize,
      fmt::format("message sizes, e.g. 4K,1M,1G (default {})", kDefaultSizes));
  p.regimes = AddListOption<Codec>(
      app, "--regimes", o.regimes, ParseRegime,
      "two-shot codecs FP,INT8,INT6,INT4,INT3 (default all; INT3 only at world size 2)");
  p.dtypes = AddListOption<BenchDType>(app, "--dtypes", o.dtypes, ParseDType,
                                       "fp16,bf16,bf16cast (default all)");
  p.modes =
      AddListOption<BenchMode>(app, "--modes", o.modes, ParseMode, "graph,eager (default both)");
  p.algos_flag =
      AddListOption<Algo>(app, "--algos", p.algos, ParseAlgo, "one-shot,two-shot (default both)");
  AddParsedOption<int>(app, "--world-size", o.world_size, ParseBenchWorldSize,
                       "2, 4 or 8 GPUs (default 2); 1 with --launch per-gpu (baselines only)")
      ->type_name("N");
  AddParsedOption<BenchLaunch>(app, "--launch", o.launch, ParseLaunch,
                               "single: one process drives every GPU (default); per-gpu: one "
                               "process per GPU, quickreduce through the broker, NCCL by an id "
                               "the launcher passes on, NCCL's symmetric kernels too")
      ->type_name("MODE");
  AddParsedOption<int>(
      app, "--max-blocks", o.max_blocks,
      [](const std::string& text) { return tools::ParseIntIn(text, 0, 65536); },
      "grid cap of the kernels (default: the backend's)")
      ->type_name("N");
  AddParsedOption<size_t>(app, "--eager-max-size", o.eager_max_bytes, ParseMessageSize,
                          "largest size timed eagerly (default 64M)")
      ->type_name("SIZE");
  app.add_flag("--no-nccl", p.no_nccl, "skip the NCCL baselines");
  app.add_flag("--no-nccl-symm", p.no_nccl_symm,
               "skip NCCL's symmetric kernels (--launch per-gpu; NCCL >= 2.27)");
  app.add_flag("--torch-symm", o.torch_symm,
               "PyTorch's symmetric-memory one-shot and two-shot as baselines (runs "
               "--torch-script with --torch-python before the sweep)");
  app.add_option("--torch-script", o.torch_script,
                 "default python/bench/symm_mem_bench.py (from the working directory)")
      ->type_name("FILE");
  app.add_option("--torch-python", o.torch_python, "default python3")->type_name("EXE");
  AddParsedOption<int>(
      app, "--launch-timeout", o.launch_timeout_s,
      [](const std::string& text) { return tools::ParseIntIn(text, 10, 86400); },
      "--launch per-gpu: seconds before the workers are stopped (default 540)")
      ->type_name("S");
  // The launcher's flags for its workers (tools/bench_launch.h), not for users.
  AddParsedOption<int>(
      app, "--worker-rank", o.worker_rank,
      [](const std::string& text) { return tools::ParseIntIn(text, 0, 7); }, "")
      ->group("");
  app.add_option("--coord", o.coord_path, "")->group("");
  app.add_option("--torch-rows", o.torch_rows_path, "")->group("");
  p.peer_bandwidth_flag = app.add_flag("--no-peer-bandwidth", p.no_peer_bandwidth,
                                       "skip the peer-store bandwidth (no link limits)");
  p.peer_bytes = AddParsedOption<size_t>(app, "--peer-bytes", o.peer_bytes, ParseMessageSize,
                                         "bytes per destination per rep (default 256M)");
  p.peer_bytes->type_name("SIZE");
  p.peer_tma_chunks = AddListOption<size_t>(
      app, "--peer-tma-chunks", o.peer_tma_chunks, ParseTmaChunk,
      "also measure the peer-store bandwidth with TMA bulk copies of these sizes, e.g. "
      "4K,8K,16K,32K (NVIDIA; default none: SM stores only)");
  app.add_option("--csv", o.csv_path, "one row per cell")->type_name("FILE");
  app.add_option("--json", o.json_path, "the rows plus a header (machine, method, command)")
      ->type_name("FILE");
  app.add_option("--min-size-table", o.min_size_table_path,
                 "the derived QR_MIN_SIZE_TABLE (also printed)")
      ->type_name("FILE");
  app.add_flag("--quick", o.quick,
               fmt::format("sizes {}, dtypes fp16,bf16, graph only, 64M peer bytes "
                           "(explicit flags override)",
                           kQuickSizes));
  app.footer(
      "exit: 0 all cells timed, 3 some cells failed (outputs written), 1 fatal, 2 bad flags");
}

// Where a list flag was not given, its default (which depends on --quick).
template <typename T>
void DefaultList(const CLI::Option* given, std::vector<T>& out, const std::string& text,
                 const tools::ItemParser<T>& parse) {
  if (given->count() > 0) return;
  out.clear();
  for (const std::string& item : tools::SplitCommaList(text)) out.push_back(*parse(item));
}

// The rules of --launch, the world size and the worker flags.
Status FinishLaunch(Parsed& p) {
  BenchOptions& o = p.o;
  const bool per_gpu = o.launch == BenchLaunch::kPerGpu;
  if (o.world_size == 1 && !per_gpu) {
    return InvalidArgumentError(
        "--world-size 1 needs --launch per-gpu (one process drives 2, 4 or 8 GPUs)");
  }
  if (o.worker_rank >= 0 || !o.coord_path.empty() || !o.torch_rows_path.empty()) {
    if (!per_gpu || o.worker_rank < 0 || o.coord_path.empty()) {
      return InvalidArgumentError(
          "--worker-rank and --coord go together, with --launch per-gpu (the launcher's flags)");
    }
    if (o.worker_rank >= o.world_size) {
      return InvalidArgumentError(fmt::format("--worker-rank {} is not below --world-size {}",
                                              o.worker_rank, o.world_size));
    }
  }
  if (!per_gpu) return OkStatus();
  if (o.max_blocks != 0) {
    return InvalidArgumentError(
        "--max-blocks: --launch per-gpu calls the library, which picks its own grid");
  }
  o.nccl_symm = o.nccl && !p.no_nccl_symm;
  if (!o.peer_tma_chunks.empty()) {
    return InvalidArgumentError(
        "--peer-tma-chunks: --launch per-gpu does not time the peer-store bandwidth");
  }
  if (o.peer_bandwidth) {
    o.peer_bandwidth = false;
    if (p.peer_bandwidth_flag->count() == 0) {
      o.notes.push_back(
          "--launch per-gpu: no peer-store bandwidth (no link limits): one process per GPU has "
          "no peer access to time it with; --launch single measures it");
    }
  }
  if (o.world_size == 1 && (o.one_shot || o.two_shot)) {
    o.one_shot = o.two_shot = false;
    o.notes.push_back(
        "world size 1: quickreduce's groups are 2, 4 or 8 ranks, so only the baselines run "
        "(their calls and captures are checked; their times mean nothing without peers)");
  }
  return OkStatus();
}

// The rules between flags, over what CLI11 parsed.
Status Finish(Parsed& p) {
  BenchOptions& o = p.o;
  DefaultList<size_t>(p.sizes, o.sizes, o.quick ? kQuickSizes : kDefaultSizes, ParseMessageSize);
  DefaultList<Codec>(p.regimes, o.regimes, kAllRegimes, ParseRegime);
  DefaultList<BenchDType>(p.dtypes, o.dtypes, o.quick ? "fp16,bf16" : "fp16,bf16,bf16cast",
                          ParseDType);
  DefaultList<BenchMode>(p.modes, o.modes, o.quick ? "graph" : "graph,eager", ParseMode);
  DefaultList<Algo>(p.algos_flag, p.algos, "one-shot,two-shot", ParseAlgo);
  if (p.peer_bytes->count() == 0) o.peer_bytes = (o.quick ? 64 : 256) * kBenchMiB;
  SortUnique(o.sizes);
  SortUnique(o.regimes);
  SortUnique(o.dtypes);
  SortUnique(o.modes);
  o.one_shot = std::find(p.algos.begin(), p.algos.end(), Algo::kOneShot) != p.algos.end();
  o.two_shot = std::find(p.algos.begin(), p.algos.end(), Algo::kTwoShot) != p.algos.end();
  o.nccl = !p.no_nccl;
  o.peer_bandwidth = !p.no_peer_bandwidth;
  QR_RETURN_IF_ERROR(FinishLaunch(p));
  const auto int3 = std::find(o.regimes.begin(), o.regimes.end(), Codec::kInt3);
  if (!CodecRunsAtWorldSize(Codec::kInt3, o.world_size) && int3 != o.regimes.end()) {
    if (p.regimes->count() > 0) {
      return InvalidArgumentError(
          fmt::format("--regimes: INT3 runs only at world size 2, not {}", o.world_size));
    }
    o.regimes.erase(int3);
    o.notes.push_back("INT3 left out: it runs only at world size 2");
  }
  if (!o.peer_bandwidth && !o.peer_tma_chunks.empty()) {
    return InvalidArgumentError(
        "--peer-tma-chunks: the peer-store bandwidth is off (--no-peer-bandwidth)");
  }
  if (o.modes == std::vector<BenchMode>{BenchMode::kEager} && o.sizes.front() > o.eager_max_bytes) {
    return InvalidArgumentError(fmt::format(
        "--modes eager: every size is above --eager-max-size {}, nothing would be timed",
        FormatBytes(o.eager_max_bytes, ByteStyle::kCompact)));
  }
  return OkStatus();
}

}  // namespace

StatusOr<size_t> ParseTmaChunk(const std::string& text) {
  const StatusOr<uint64_t> b = ParseBytes(text);
  if (!b.ok() || *b < kTmaChunkMinBytes || *b > kTmaChunkMaxBytes || *b % 16 != 0) {
    return InvalidArgumentError(
        fmt::format("TMA chunk '{}' must be a multiple of 16 bytes from {} to {}", text,
                    kTmaChunkMinBytes, FormatBytes(kTmaChunkMaxBytes, ByteStyle::kCompact)));
  }
  return static_cast<size_t>(*b);
}

std::string PeerStoreChoiceName(const PeerStoreChoice& choice) {
  if (!choice.tma) return "sm";
  return "tma " + FormatBytes(choice.chunk_bytes, ByteStyle::kCompact);
}

std::vector<PeerStoreChoice> PeerStoreChoices(const std::vector<size_t>& tma_chunks) {
  std::vector<PeerStoreChoice> c = {{false, 0}};
  for (size_t chunk : tma_chunks) c.push_back({true, chunk});
  return c;
}

const char* BenchDTypeName(BenchDType dtype) { return WorkFormatName(dtype); }

const char* BenchModeName(BenchMode mode) {
  return mode == BenchMode::kGraph ? "graph" : mode == BenchMode::kEager ? "eager" : "?";
}

const char* BenchAlgoName(BenchAlgo algo) {
  switch (algo) {
    case BenchAlgo::kTwoShot:
      return "two-shot";
    case BenchAlgo::kOneShot:
      return "one-shot";
    case BenchAlgo::kPolicy:
      return "policy";
    case BenchAlgo::kNccl:
      return "nccl";
    case BenchAlgo::kNcclSymm:
      return "nccl-symm";
    case BenchAlgo::kTorchOneShot:
      return "torch-one-shot";
    case BenchAlgo::kTorchTwoShot:
      return "torch-two-shot";
  }
  return "?";
}

const char* BenchLaunchName(BenchLaunch launch) {
  return launch == BenchLaunch::kPerGpu ? "per-gpu" : "single";
}

std::vector<std::string> WorkerArgs(const std::vector<std::string>& launcher_args, int rank,
                                    const std::string& coord_path,
                                    const std::string& torch_rows_path) {
  std::vector<std::string> args = launcher_args;
  args.insert(args.end(), {"--worker-rank", std::to_string(rank), "--coord", coord_path});
  if (!torch_rows_path.empty()) args.insert(args.end(), {"--torch-rows", torch_rows_path});
  return args;
}

std::string BenchUsage() {
  CLI::App app{"qr-bench: quickreduce's all-reduce against NCCL on this machine's GPUs",
               "qr-bench"};
  Parsed p;
  DefineFlags(app, p);
  return app.help();
}

StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args) {
  CLI::App app{"qr-bench", "qr-bench"};
  Parsed p;
  DefineFlags(app, p);
  QR_RETURN_IF_ERROR(tools::ParseCli(app, args, &p.o.help));
  if (p.o.help) return p.o;
  QR_RETURN_IF_ERROR(Finish(p));
  return p.o;
}

}  // namespace qr::bench
