#include "tools/kernel_cost_options.h"

#include <fmt/format.h>

#include "CLI/CLI.hpp"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "kernels/geometry.h"
#include "tools/cli_list.h"

namespace qr::cost {
namespace {

constexpr const char* kTwoShotSizes = "4M,64M,256M";
constexpr const char* kOneShotSizes = "4K,64K,256K,1M,4M";
constexpr const char* kPeerStoreSizes = "16M,64M,256M,1G";
constexpr const char* kPeerTmaChunks = "4K,8K,16K,32K";

struct Flags {
  CostOptions o;
  std::string sizes, dtypes, regimes, world_size;
  CLI::Option* sizes_opt = nullptr;
  CLI::Option* dtypes_opt = nullptr;
  CLI::Option* regimes_opt = nullptr;
  CLI::Option* world_size_opt = nullptr;
  CLI::Option* reps_opt = nullptr;
  CLI::Option* iters_opt = nullptr;
  CLI::Option* stagger_opt = nullptr;
  CLI::Option* algorithm_opt = nullptr;
  CLI::Option* mode_opt = nullptr;
  CLI::Option* launch_opt = nullptr;
  CLI::Option* peer_chunks_opt = nullptr;
  CLI::Option* peer_blocks_opt = nullptr;
};

constexpr CostLaunch kLaunches[] = {CostLaunch::kEager, CostLaunch::kGraph,
                                    CostLaunch::kEagerThreads, CostLaunch::kGraphThreads};
// A threaded launch's defaults: one call per sample, enough samples for a p99.
constexpr int kThreadedReps = 200;
constexpr int kThreadedIters = 1;

StatusOr<Algorithm> ParseAlgorithm(const std::string& text) {
  if (text == AlgorithmName(Algorithm::kTwoShot)) return Algorithm::kTwoShot;
  if (text == AlgorithmName(Algorithm::kOneShot)) return Algorithm::kOneShot;
  return InvalidArgumentError(fmt::format("'{}' is not one of two-shot, one-shot", text));
}

}  // namespace

StatusOr<CostMode> ParseCostMode(const std::string& text) {
  for (CostMode m : {CostMode::kShared, CostMode::kAlone}) {
    if (text == CostModeName(m)) return m;
  }
  return InvalidArgumentError(fmt::format("'{}' is not one of shared, alone", text));
}

namespace {

StatusOr<CostLaunch> ParseLaunch(const std::string& text) {
  for (CostLaunch l : kLaunches) {
    if (text == CostLaunchName(l)) return l;
  }
  return InvalidArgumentError(
      fmt::format("'{}' is not one of eager, graph, eager-threads, graph-threads", text));
}

void DefineFlags(CLI::App& app, Flags& f) {
  tools::UseToolDefaults(app);
  CostOptions& o = f.o;
  f.sizes_opt = app.add_option("--sizes", f.sizes,
                               fmt::format("message sizes (default {} two-shot, {} one-shot)",
                                           kTwoShotSizes, kOneShotSizes))
                    ->type_name("LIST");
  f.dtypes_opt =
      app.add_option("--dtypes", f.dtypes, "fp16,bf16,bf16cast (default all)")->type_name("LIST");
  f.regimes_opt =
      app.add_option("--regimes", f.regimes, "two-shot codecs FP,INT8,INT6,INT4,INT3 (default all)")
          ->type_name("LIST");
  f.world_size_opt =
      app.add_option("--world-size", f.world_size, "ranks, all on GPU 0: 2, 4 or 8 (default 2)")
          ->type_name("N");
  f.algorithm_opt = tools::AddParsedOption<Algorithm>(
      app, "--algorithm", o.algorithm, ParseAlgorithm, "two-shot or one-shot (default two-shot)");
  f.algorithm_opt->type_name("ALGO");
  f.mode_opt = tools::AddParsedOption<CostMode>(
      app, "--mode", o.mode, ParseCostMode,
      "shared: every rank's kernel; alone: rank 0's only, timing variants no_waits/bare "
      "(default shared)");
  f.mode_opt->type_name("MODE");
  f.launch_opt = tools::AddParsedOption<CostLaunch>(
      app, "--launch", o.launch, ParseLaunch,
      "eager: a host launch per call; graph: the calls captured once, replayed; both from one "
      "host thread. eager-threads, graph-threads: the same from one host thread per rank, "
      "released together for each repetition (default eager)");
  f.launch_opt->type_name("HOW");
  app.add_flag("--peer-store", o.peer_store,
               fmt::format("time the peer-store kernels instead (issue 18 item 8): rank 0 "
                           "writing the other ranks' buffers on GPU 0 by SM stores and by TMA "
                           "bulk copies; sizes per destination (default {}). One GPU: the "
                           "issue side and HBM, not NVLink",
                           kPeerStoreSizes));
  f.peer_chunks_opt = tools::AddListOption<size_t>(
      app, "--peer-tma-chunks", o.peer_tma_chunks, bench::ParseTmaChunk,
      fmt::format("--peer-store: TMA bytes per bulk copy (default {})", kPeerTmaChunks));
  f.peer_blocks_opt = tools::AddListOption<int>(
      app, "--peer-blocks", o.peer_blocks,
      [](const std::string& t) { return tools::ParseIntIn(t, 0, 65536); },
      "--peer-store: grids to time (default 0: 2 blocks per multiprocessor)");
  f.reps_opt = tools::AddParsedOption<int>(
                   app, "--reps", o.reps,
                   [](const std::string& t) { return tools::ParseIntIn(t, 1, 100000); },
                   "timed repetitions per cell (default 7; 200 threaded)")
                   ->type_name("N");
  f.iters_opt =
      tools::AddParsedOption<int>(
          app, "--iters", o.iters,
          [](const std::string& t) { return tools::ParseIntIn(t, 0, 100000); },
          "calls per repetition (default 0: min(50, 256M / size), at least 2; 1 threaded)")
          ->type_name("N");
  f.stagger_opt = tools::AddParsedOption<int>(
                      app, "--stagger", o.stagger_us,
                      [](const std::string& t) { return tools::ParseIntIn(t, 0, 100000); },
                      "threaded launches: rank r starts r x this many microseconds after the "
                      "release (default 0)")
                      ->type_name("US");
  tools::AddParsedOption<int>(
      app, "--warmup", o.warmup, [](const std::string& t) { return tools::ParseIntIn(t, 0, 100); },
      "untimed repetitions first (default 2)")
      ->type_name("N");
  app.add_option("--csv", o.csv_path, "one row per cell")->type_name("FILE");
  app.add_option("--json", o.json_path, "the rows plus the run's facts")->type_name("FILE");
  app.footer(
      "exit: 0 every cell timed, 3 some cells failed (outputs written), 1 fatal, 2 bad flags");
}

}  // namespace

const char* CostModeName(CostMode mode) { return mode == CostMode::kAlone ? "alone" : "shared"; }
const char* CostLaunchName(CostLaunch launch) {
  switch (launch) {
    case CostLaunch::kEager:
      break;
    case CostLaunch::kGraph:
      return "graph";
    case CostLaunch::kEagerThreads:
      return "eager-threads";
    case CostLaunch::kGraphThreads:
      return "graph-threads";
  }
  return "eager";
}

bool LaunchUsesThreads(CostLaunch launch) {
  return launch == CostLaunch::kEagerThreads || launch == CostLaunch::kGraphThreads;
}

bool LaunchUsesGraphs(CostLaunch launch) {
  return launch == CostLaunch::kGraph || launch == CostLaunch::kGraphThreads;
}

std::string CostUsage() {
  CLI::App app{"qr-kernel-cost: the all-reduce kernels' cost on one GPU, every rank on GPU 0",
               "qr-kernel-cost"};
  Flags f;
  DefineFlags(app, f);
  return app.help();
}

StatusOr<CostOptions> ParseCostArgs(const std::vector<std::string>& args) {
  CLI::App app{"qr-kernel-cost", "qr-kernel-cost"};
  Flags f;
  DefineFlags(app, f);
  bool help = false;
  QR_RETURN_IF_ERROR(tools::ParseCli(app, args, &help));
  CostOptions o = f.o;
  if (help) {
    o.help = true;
    return o;
  }
  if (o.peer_store) {
    for (const CLI::Option* opt :
         {f.algorithm_opt, f.mode_opt, f.launch_opt, f.dtypes_opt, f.regimes_opt, f.stagger_opt}) {
      if (opt->count() > 0) {
        return InvalidArgumentError(fmt::format(
            "{}: --peer-store times the peer-store kernels, which take no all-reduce flags",
            opt->get_name()));
      }
    }
  } else {
    for (const CLI::Option* opt : {f.peer_chunks_opt, f.peer_blocks_opt}) {
      if (opt->count() > 0) {
        return InvalidArgumentError(fmt::format("{}: only with --peer-store", opt->get_name()));
      }
    }
  }
  const bool one_shot = o.algorithm == Algorithm::kOneShot;
  const bool threads = LaunchUsesThreads(o.launch);
  if (threads && o.mode == CostMode::kAlone) {
    return InvalidArgumentError(fmt::format(
        "--launch {}: --mode alone launches rank 0 only, so there are no ranks to release "
        "together (use --mode shared)",
        CostLaunchName(o.launch)));
  }
  if (!threads && f.stagger_opt->count() > 0) {
    return InvalidArgumentError(
        "--stagger: only the threaded launches (eager-threads, graph-threads) release ranks");
  }
  if (threads && f.reps_opt->count() == 0) o.reps = kThreadedReps;
  if (threads && f.iters_opt->count() == 0) o.iters = kThreadedIters;
  if (one_shot && f.regimes_opt->count() > 0) {
    return InvalidArgumentError("--regimes: one-shot sends exact values and takes no codec");
  }
  // qr-bench's parser reads the lists (same syntax, same checks, same order).
  std::vector<std::string> bench_args = {"--algos", "two-shot",  "--modes",
                                         "graph",   "--no-nccl", "--no-peer-bandwidth"};
  bench_args.insert(bench_args.end(), {"--sizes", f.sizes_opt->count() > 0 ? f.sizes
                                                  : o.peer_store           ? kPeerStoreSizes
                                                  : one_shot               ? kOneShotSizes
                                                                           : kTwoShotSizes});
  if (f.dtypes_opt->count() > 0) bench_args.insert(bench_args.end(), {"--dtypes", f.dtypes});
  if (f.regimes_opt->count() > 0) bench_args.insert(bench_args.end(), {"--regimes", f.regimes});
  if (f.world_size_opt->count() > 0) {
    bench_args.insert(bench_args.end(), {"--world-size", f.world_size});
  }
  QR_ASSIGN_OR_RETURN(const bench::BenchOptions b, bench::ParseBenchArgs(bench_args));
  o.sizes = b.sizes;
  if (o.peer_store) {
    o.world_size = b.world_size;
    if (f.peer_chunks_opt->count() == 0) {
      o.peer_tma_chunks.clear();
      for (const std::string& c : tools::SplitCommaList(kPeerTmaChunks)) {
        o.peer_tma_chunks.push_back(*bench::ParseTmaChunk(c));
      }
    }
    if (f.peer_blocks_opt->count() == 0) o.peer_blocks = {0};
    return o;
  }
  o.dtypes = b.dtypes;
  o.regimes = one_shot ? std::vector<Codec>{Codec::kFp} : b.regimes;
  o.world_size = b.world_size;
  if (!one_shot) o.notes = b.notes;
  if (one_shot) {
    const size_t max = static_cast<size_t>(kernels::OneShotMaxBytes(o.world_size));
    if (o.sizes.back() > max) {
      return InvalidArgumentError(
          fmt::format("--sizes: one-shot takes at most {} at world size {}, got {}",
                      FormatBytes(max, ByteStyle::kCompact), o.world_size,
                      FormatBytes(o.sizes.back(), ByteStyle::kCompact)));
    }
  }
  return o;
}

Status CheckVariant(const CostOptions& o, std::string_view variant) {
  return CheckAloneVariant(o.mode == CostMode::kAlone, variant);
}

Status CheckAloneVariant(bool alone, std::string_view variant) {
  if (!alone || variant == "no_waits" || variant == "bare") return OkStatus();
  return UnsupportedError(fmt::format(
      "--mode alone needs a timing variant that skips the waits (no_waits or bare: "
      ".device/variants/<name>/qr-kernel-cost, staged with QR_STAGE_VARIANTS); this binary is {}, "
      "whose rank 0 would wait for peers that are never launched",
      variant.empty() ? std::string("the real kernels")
                      : "the " + std::string(variant) + " variant"));
}

}  // namespace qr::cost
