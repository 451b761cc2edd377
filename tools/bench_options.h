// qr-bench's command line: what to sweep (sizes x regimes x dtypes x modes x
// algorithms), where to write results, and the size syntax ("4K", "1M").
// Parsing is pure (CLI11, then the rules between flags) and validates
// everything before the benchmark touches a GPU, so a bad flag costs nothing
// on the device machine.
//
//   QR_ASSIGN_OR_RETURN(BenchOptions o, ParseBenchArgs({"--sizes", "1M,64M"}));
#ifndef QR_TOOLS_BENCH_OPTIONS_H_
#define QR_TOOLS_BENCH_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/types.h"

namespace qr::bench {

// The work format (kernels/types.h): what the kernels take.
using BenchDType = WorkFormat;
enum class BenchMode : int {
  kGraph = 0,  // calls captured in a graph, replayed
  kEager = 1,  // calls launched one by one from the host
};
// What a result row is: a timed algorithm, the policy's pick (a copy of a
// timed number), or a baseline: classic NCCL (ncclAllReduce on plain
// buffers), NCCL's symmetric kernels (window-registered buffers, NCCL >=
// 2.27; --launch per-gpu only), PyTorch's symmetric-memory one-shot and
// two-shot (python/bench/symm_mem_bench.py run by qr-bench, --torch-symm).
enum class BenchAlgo : int {
  kTwoShot = 0,
  kOneShot = 1,
  kPolicy = 2,
  kNccl = 3,
  kNcclSymm = 4,
  kTorchOneShot = 5,
  kTorchTwoShot = 6,
};
// True for the baselines (every algo a peer library runs).
constexpr bool IsBaseline(BenchAlgo algo) {
  return algo == BenchAlgo::kNccl || algo == BenchAlgo::kNcclSymm ||
         algo == BenchAlgo::kTorchOneShot || algo == BenchAlgo::kTorchTwoShot;
}
// How the GPUs are driven: one process for all of them through peer access
// (kernels/gpu/local_group.h), or one process per GPU (tools/bench_launch.h),
// each joining quickreduce's group through the broker and NCCL through an id
// the launcher passes on, as serving processes do.
enum class BenchLaunch : int { kSingle = 0, kPerGpu = 1 };

const char* BenchDTypeName(BenchDType dtype);  // "fp16", "bf16", "bf16cast"
const char* BenchModeName(BenchMode mode);     // "graph", "eager"
// "two-shot", "one-shot", "policy", "nccl", "nccl-symm", "torch-one-shot",
// "torch-two-shot" (the last two as symm_mem_bench.py's op column names them).
const char* BenchAlgoName(BenchAlgo algo);
const char* BenchLaunchName(BenchLaunch launch);  // "single", "per-gpu"

inline constexpr size_t kBenchMiB = size_t{1} << 20;
// Largest message the bench accepts (two buffers of it per GPU).
inline constexpr size_t kBenchMaxBytes = size_t{4} << 30;

// TMA bulk-copy sizes the tools accept for the peer-store measurement: a
// multiple of 16 bytes in this range (kernels/gpu/peer_bandwidth.h's
// kPeerStoreMin/MaxChunkBytes, which host-only code cannot include;
// tools/bench_peer.cc checks that they agree).
inline constexpr size_t kTmaChunkMinBytes = 16;
inline constexpr size_t kTmaChunkMaxBytes = size_t{64} << 10;
// A chunk size as --peer-tma-chunks takes it ("16K", "4096"): kInvalidArgument
// saying the rule otherwise.
[[nodiscard]] StatusOr<size_t> ParseTmaChunk(const std::string& text);

// How a peer-store measurement writes (kernels/gpu/peer_bandwidth.h's
// PeerStoreMethod): 16-byte stores from the threads (the kernels' method,
// behind the link limits), or TMA bulk copies of chunk_bytes each.
struct PeerStoreChoice {
  bool tma = false;
  size_t chunk_bytes = 0;  // tma only
};
// "sm", or "tma" and the chunk ("tma 16K").
std::string PeerStoreChoiceName(const PeerStoreChoice& choice);
// SM stores first, then TMA with each chunk in the order given.
std::vector<PeerStoreChoice> PeerStoreChoices(const std::vector<size_t>& tma_chunks);

struct BenchOptions {
  std::vector<size_t> sizes;   // bytes, ascending, unique, multiples of 16
  std::vector<Codec> regimes;  // two-shot codecs (and the policy's regimes)
  std::vector<BenchDType> dtypes;
  std::vector<BenchMode> modes;
  bool one_shot = true;  // --algos
  bool two_shot = true;
  int world_size = 2;  // 1 only with --launch per-gpu (the baselines alone)
  int max_blocks = 0;  // 0: the backend's default grid cap
  bool nccl = true;
  BenchLaunch launch = BenchLaunch::kSingle;
  // NCCL's symmetric kernels beside classic NCCL (--launch per-gpu; off
  // with --no-nccl or --no-nccl-symm).
  bool nccl_symm = false;
  // --torch-symm: PyTorch's symmetric memory, torch_python torch_script run
  // before the sweep (its rows join the table); --torch-script, --torch-python.
  bool torch_symm = false;
  std::string torch_script = "python/bench/symm_mem_bench.py";
  std::string torch_python = "python3";
  // --launch per-gpu: seconds the launcher gives its workers before it stops
  // them (--launch-timeout).
  int launch_timeout_s = 540;
  // Set by the launcher on the command lines of its workers (hidden flags):
  // this process's rank, the coordinator's socket (tools/bench_coord.h), and
  // the torch rows' CSV (rank 0 merges them).
  int worker_rank = -1;
  std::string coord_path;
  std::string torch_rows_path;
  // Eager cells are timed only up to this size: above it launch overhead is
  // noise and graph numbers say the same.
  size_t eager_max_bytes = 64 * kBenchMiB;
  bool peer_bandwidth = true;
  size_t peer_bytes = 256 * kBenchMiB;  // per destination, per rep
  int peer_reps = 5;
  // --peer-tma-chunks: besides the SM stores (the link limits), the same
  // measurement by TMA bulk copies of each of these sizes; empty: none.
  std::vector<size_t> peer_tma_chunks;
  std::string csv_path;
  std::string json_path;
  std::string min_size_table_path;
  bool quick = false;
  bool help = false;               // --help: print BenchUsage() and exit 0
  std::vector<std::string> notes;  // adjustments worth telling the user
};

// Parses argv[1..] with CLI11: "--flag value" or "--flag=value", lists
// comma-separated, sizes as common/bytes.h reads them ("4K", "1M"). Defaults:
// the full sweep (4K..1G, FP..INT3, fp16/bf16/bf16cast, graph and eager,
// both algorithms, NCCL, world size 2). --quick picks a smaller default set
// that explicit flags still override. kInvalidArgument naming the flag (and
// the allowed values) for an unknown flag, a missing value, an unknown or
// empty list item, a bad size (not a positive multiple of 16, above 4 GiB),
// a world size not 2/4/8 (1 with --launch per-gpu), INT3 asked for at a world size other than 2, an
// eager-only sweep with nothing to time, a bad --peer-tma-chunks size
// (ParseTmaChunk), --peer-tma-chunks with --no-peer-bandwidth or --launch
// per-gpu, --max-blocks with --launch per-gpu, or worker flags without --launch per-gpu or out of
// range. --help sets `help` and nothing else. --launch per-gpu turns nccl_symm on (unless
// --no-nccl or --no-nccl-symm) and the peer-store bandwidth off (one process
// per GPU has no peer access to time it with; noted); at world size 1 it turns
// the quickreduce algorithms off (noted: quickreduce's groups are 2, 4 or 8
// ranks, the baselines alone run).
[[nodiscard]] StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args);

// The --help text (CLI11's, from the same flag definitions).
std::string BenchUsage();

// A worker's command line: the launcher's own arguments (argv[1..]) with the
// worker flags for `rank` appended (--worker-rank, --coord and, when not
// empty, --torch-rows). Parsing it gives the launcher's options plus those.
std::vector<std::string> WorkerArgs(const std::vector<std::string>& launcher_args, int rank,
                                    const std::string& coord_path,
                                    const std::string& torch_rows_path);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_OPTIONS_H_
