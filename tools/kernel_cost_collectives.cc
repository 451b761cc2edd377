#include "tools/kernel_cost_collectives.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "CLI/CLI.hpp"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "kernels/geometry.h"
#include "tools/cli_list.h"

namespace qr::cost {
namespace {

StatusOr<size_t> ParseSize(const std::string& text) {
  QR_ASSIGN_OR_RETURN(const uint64_t b, ParseBytes(text));
  if (b == 0 || b % 16 != 0 || b > bench::kBenchMaxBytes) {
    return InvalidArgumentError("'" + text +
                                "' is not a positive multiple of 16 bytes, at most 4G");
  }
  return static_cast<size_t>(b);
}

StatusOr<bench::BenchDType> ParseDType(const std::string& text) {
  for (bench::BenchDType d : kAllWorkFormats) {
    if (text == bench::BenchDTypeName(d)) return d;
  }
  return InvalidArgumentError("'" + text + "' is not one of fp16, bf16, bf16cast");
}

StatusOr<Codec> ParseRegime(const std::string& text) {
  const std::optional<Codec> c = CodecFromName(text);
  if (!c) return InvalidArgumentError("'" + text + "' is not one of FP, INT8, INT6, INT4, INT3");
  return *c;
}

}  // namespace

StatusOr<CollectiveCostOptions> ParseCollectiveCostArgs(Collective kind,
                                                        const std::vector<std::string>& args) {
  if (kind != Collective::kReduceScatter && kind != Collective::kAllGather) {
    return InvalidArgumentError("qr-kernel-cost times reduce-scatter or all-gather here");
  }
  CollectiveCostOptions o;
  o.kind = kind;
  CLI::App app{std::string("qr-kernel-cost --") + CollectiveCostKindName(kind), "qr-kernel-cost"};
  tools::UseToolDefaults(app);
  tools::AddListOption<size_t>(app, "--sizes", o.sizes, ParseSize, "1M,16M,64M,256M");
  tools::AddListOption<bench::BenchDType>(app, "--dtypes", o.dtypes, ParseDType, "fp16,bf16");
  tools::AddListOption<Codec>(app, "--regimes", o.regimes, ParseRegime, "FP,INT8,INT4");
  tools::AddParsedOption<int>(app, "--world-size", o.world_size, tools::ParseWorldSize, "2");
  tools::AddParsedOption<int>(
      app, "--reps", o.reps, [](const std::string& t) { return tools::ParseIntIn(t, 1, 10000); },
      "7");
  tools::AddParsedOption<int>(
      app, "--iters", o.iters, [](const std::string& t) { return tools::ParseIntIn(t, 1, 10000); },
      "20");
  app.add_option("--csv", o.csv_path, "CSV output path");
  app.add_flag("--one-shot", o.one_shot,
               "the one-shot forms: the collective's and the all-reduce's one-shot kernels");
  QR_RETURN_IF_ERROR(tools::ParseCli(app, args, &o.help));
  if (o.sizes.empty() && o.one_shot) {
    o.sizes = {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20};
  } else if (o.sizes.empty()) {
    o.sizes = {size_t{1} << 20, size_t{16} << 20, size_t{64} << 20, size_t{256} << 20};
  }
  if (o.dtypes.empty()) o.dtypes = {bench::BenchDType::kFp16, bench::BenchDType::kBf16};
  if (o.regimes.empty()) o.regimes = {Codec::kFp, Codec::kInt8, Codec::kInt4};
  std::sort(o.sizes.begin(), o.sizes.end());
  o.sizes.erase(std::unique(o.sizes.begin(), o.sizes.end()), o.sizes.end());
  const size_t unit = 16 * static_cast<size_t>(o.world_size);
  const auto one_shot_max = static_cast<size_t>(kernels::OneShotMaxBytes(o.world_size));
  for (size_t b : o.sizes) {
    if (o.one_shot && b > one_shot_max) {
      return InvalidArgumentError("--sizes: " + std::to_string(b) +
                                  " bytes is more than the one-shot region holds at world size " +
                                  std::to_string(o.world_size) + " (" +
                                  std::to_string(one_shot_max) + ")");
    }
    if (b % unit != 0) {
      return InvalidArgumentError("--sizes: " + std::to_string(b) + " bytes is not a multiple of " +
                                  std::to_string(unit) + " (16-byte shards at world size " +
                                  std::to_string(o.world_size) + ")");
    }
  }
  for (Codec c : o.regimes) {
    if (!CodecRunsAtWorldSize(c, o.world_size)) {
      return InvalidArgumentError(std::string("--regimes: ") + CodecName(c) +
                                  " does not run at world size " + std::to_string(o.world_size));
    }
  }
  return o;
}

std::string CollectiveCostUsage() {
  return "qr-kernel-cost --reduce-scatter|--all-gather [--sizes 1M,16M,64M,256M]\n"
         "    [--dtypes fp16,bf16] [--regimes FP,INT8,INT4] [--world-size 2] [--reps 7]\n"
         "    [--iters 20] [--csv PATH] [--one-shot]\n"
         "  The reduce-scatter or all-gather kernel against the two-shot all-reduce of the same\n"
         "  whole message, every rank on GPU 0, graph-captured; sizes are whole messages.\n"
         "  --one-shot: both one-shot (sizes up to the one-shot region; default 4K,64K,1M).\n";
}

std::vector<CollectiveCostCell> PlanCollectiveCells(const CollectiveCostOptions& o) {
  std::vector<CollectiveCostCell> cells;
  for (Codec codec : o.regimes) {
    for (bench::BenchDType dtype : o.dtypes) {
      for (size_t bytes : o.sizes) {
        cells.push_back({bytes, bytes / 2 / static_cast<size_t>(o.world_size), dtype, codec});
      }
    }
  }
  return cells;
}

const char* CollectiveCostKindName(Collective kind) {
  return kind == Collective::kAllGather ? "all-gather" : "reduce-scatter";
}

std::string CollectiveTableHeader(Collective kind) {
  return std::string("      bytes dtype    regime all-reduce_us ") +
         (kind == Collective::kAllGather ? "all-gather_us" : "reduce-scatter_us") + " ratio\n";
}

std::string CollectiveTableLine(const CollectiveCostResult& r) {
  char line[256];
  const std::string size = FormatBytes(r.cell.bytes, ByteStyle::kCompact);
  if (!r.error.empty()) {
    std::snprintf(line, sizeof(line), "%11s %-8s %-6s FAILED: %s\n", size.c_str(),
                  bench::BenchDTypeName(r.cell.dtype), CodecName(r.cell.codec), r.error.c_str());
    return line;
  }
  std::snprintf(line, sizeof(line), "%11s %-8s %-6s %13.2f %13.2f %5.3f\n", size.c_str(),
                bench::BenchDTypeName(r.cell.dtype), CodecName(r.cell.codec), r.all_reduce_us,
                r.collective_us, r.all_reduce_us > 0 ? r.collective_us / r.all_reduce_us : 0.0);
  return line;
}

std::string CollectiveCsvHeader() {
  return "collective,algorithm,bytes,count,dtype,regime,all_reduce_us,collective_us,error\n";
}

std::string CollectiveCsvLine(Collective kind, bool one_shot, const CollectiveCostResult& r) {
  char line[256];
  std::snprintf(line, sizeof(line), "%s,%s,%zu,%zu,%s,%s,%.3f,%.3f,", CollectiveCostKindName(kind),
                one_shot ? "one-shot" : "two-shot", r.cell.bytes, r.cell.count,
                bench::BenchDTypeName(r.cell.dtype), CodecName(r.cell.codec), r.all_reduce_us,
                r.collective_us);
  std::string error = r.error;
  std::replace(error.begin(), error.end(), ',', ';');
  return line + error + "\n";
}

}  // namespace qr::cost
