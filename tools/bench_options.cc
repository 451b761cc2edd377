#include "tools/bench_options.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>

#include "common/limits.h"
#include "common/status_macros.h"

namespace qr::bench {
namespace {

constexpr const char* kDefaultSizes = "4K,16K,64K,256K,1M,2M,4M,16M,64M,256M,1G";
constexpr const char* kQuickSizes = "4K,64K,256K,1M,4M,16M,64M";

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string_view::npos) j = s.size();
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

template <typename T>
void AppendUnique(std::vector<T>& v, T x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

StatusOr<int> ParseInt(std::string_view flag, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi) {
    return InvalidArgumentError(std::string(flag) + ": '" + text + "' is not an integer in " +
                                std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<int>(v);
}

StatusOr<size_t> ParseFlagSize(std::string_view flag, const std::string& text) {
  auto b = ParseSize(text);
  if (!b.ok()) return InvalidArgumentError(std::string(flag) + ": " + b.status().message());
  if (*b == 0 || !IsWholeMessageUnits(*b) || *b > kBenchMaxBytes) {
    return InvalidArgumentError(std::string(flag) + ": " + text +
                                " must be a positive multiple of 16 bytes, at most 4G");
  }
  return *b;
}

StatusOr<std::vector<size_t>> ParseSizes(const std::string& text) {
  std::vector<size_t> out;
  for (const auto& s : SplitList(text)) {
    QR_ASSIGN_OR_RETURN(size_t b, ParseFlagSize("--sizes", s));
    AppendUnique(out, b);
  }
  if (out.empty()) return InvalidArgumentError("--sizes: empty list");
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<std::vector<Codec>> ParseRegimes(const std::string& text) {
  std::vector<Codec> out;
  for (const auto& s : SplitList(text)) {
    const std::optional<Codec> c = CodecFromName(s);
    if (!c) return InvalidArgumentError("--regimes: '" + s + "' is not one of FP, INT8, INT6, INT4, INT3");
    AppendUnique(out, *c);
  }
  if (out.empty()) return InvalidArgumentError("--regimes: empty list");
  return out;
}

StatusOr<std::vector<BenchDType>> ParseDTypes(const std::string& text) {
  std::vector<BenchDType> out;
  for (const auto& s : SplitList(text)) {
    std::optional<BenchDType> d;
    for (BenchDType k : {BenchDType::kFp16, BenchDType::kBf16, BenchDType::kBf16Cast}) {
      if (s == BenchDTypeName(k)) d = k;
    }
    if (!d) return InvalidArgumentError("--dtypes: '" + s + "' is not one of fp16, bf16, bf16cast");
    AppendUnique(out, *d);
  }
  if (out.empty()) return InvalidArgumentError("--dtypes: empty list");
  return out;
}

StatusOr<std::vector<BenchMode>> ParseModes(const std::string& text) {
  std::vector<BenchMode> out;
  for (const auto& s : SplitList(text)) {
    if (s == "graph") {
      AppendUnique(out, BenchMode::kGraph);
    } else if (s == "eager") {
      AppendUnique(out, BenchMode::kEager);
    } else {
      return InvalidArgumentError("--modes: '" + s + "' is not one of graph, eager");
    }
  }
  if (out.empty()) return InvalidArgumentError("--modes: empty list");
  return out;
}

Status ParseAlgos(const std::string& text, BenchOptions& o) {
  o.one_shot = o.two_shot = false;
  for (const auto& s : SplitList(text)) {
    if (s == "one-shot") {
      o.one_shot = true;
    } else if (s == "two-shot") {
      o.two_shot = true;
    } else {
      return InvalidArgumentError("--algos: '" + s + "' is not one of one-shot, two-shot");
    }
  }
  if (!o.one_shot && !o.two_shot) return InvalidArgumentError("--algos: empty list");
  return OkStatus();
}

}  // namespace

const char* BenchDTypeName(BenchDType dtype) { return WorkFormatName(dtype); }

const char* BenchModeName(BenchMode mode) {
  return mode == BenchMode::kGraph ? "graph" : mode == BenchMode::kEager ? "eager" : "?";
}

const char* BenchAlgoName(BenchAlgo algo) {
  switch (algo) {
    case BenchAlgo::kTwoShot: return "two-shot";
    case BenchAlgo::kOneShot: return "one-shot";
    case BenchAlgo::kPolicy: return "policy";
    case BenchAlgo::kNccl: return "nccl";
  }
  return "?";
}

StatusOr<size_t> ParseSize(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("empty size");
  size_t mult = 1;
  std::string_view digits = text;
  switch (text.back()) {
    case 'K': case 'k': mult = size_t{1} << 10; break;
    case 'M': case 'm': mult = size_t{1} << 20; break;
    case 'G': case 'g': mult = size_t{1} << 30; break;
    default: break;
  }
  if (mult != 1) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 15 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not a size (digits with an optional K, M or G)");
  }
  const size_t n = std::stoull(std::string(digits));
  if (n > std::numeric_limits<size_t>::max() / mult) {
    return InvalidArgumentError("'" + std::string(text) + "' is too large");
  }
  return n * mult;
}

std::string SizeName(size_t b) {
  if (b >= (size_t{1} << 30) && b % (size_t{1} << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (size_t{1} << 20) && b % (size_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string BenchUsage() {
  return "usage: qr-bench [flags]\n"
         "  --sizes LIST          message sizes, e.g. 4K,1M,1G (default " +
         std::string(kDefaultSizes) +
         ")\n"
         "  --regimes LIST        FP,INT8,INT6,INT4,INT3 (default all; INT3 only at world size 2)\n"
         "  --dtypes LIST         fp16,bf16,bf16cast (default all)\n"
         "  --modes LIST          graph,eager (default both)\n"
         "  --algos LIST          one-shot,two-shot (default both)\n"
         "  --world-size N        2, 4 or 8 GPUs (default 2)\n"
         "  --max-blocks N        grid cap of the kernels (default: the backend's)\n"
         "  --eager-max-size S    largest size timed eagerly (default 64M)\n"
         "  --no-nccl             skip the NCCL baseline\n"
         "  --no-peer-bandwidth   skip the peer-store bandwidth (no link limits)\n"
         "  --peer-bytes S        bytes per destination per rep (default 256M)\n"
         "  --csv FILE            one row per cell\n"
         "  --json FILE           the rows plus a header (machine, method, command)\n"
         "  --min-size-table FILE the derived QR_MIN_SIZE_TABLE (also printed)\n"
         "  --quick               sizes " +
         std::string(kQuickSizes) +
         ", dtypes fp16,bf16, graph only, 64M peer bytes\n"
         "                        (explicit flags override)\n"
         "  --help                this text\n"
         "exit: 0 all cells timed, 3 some cells failed (outputs written), 1 fatal, 2 bad flags\n";
}

StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args) {
  BenchOptions o;
  std::optional<std::string> sizes, regimes, dtypes, modes, peer_bytes;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto value = [&]() -> StatusOr<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return InvalidArgumentError(flag + " needs a value");
      return args[++i];
    };
    auto no_value = [&]() -> Status {
      if (inline_value) return InvalidArgumentError(flag + " takes no value");
      return OkStatus();
    };
    if (flag == "--sizes") {
      QR_ASSIGN_OR_RETURN(sizes, value());
    } else if (flag == "--regimes") {
      QR_ASSIGN_OR_RETURN(regimes, value());
    } else if (flag == "--dtypes") {
      QR_ASSIGN_OR_RETURN(dtypes, value());
    } else if (flag == "--modes") {
      QR_ASSIGN_OR_RETURN(modes, value());
    } else if (flag == "--algos") {
      QR_ASSIGN_OR_RETURN(std::string v, value());
      QR_RETURN_IF_ERROR(ParseAlgos(v, o));
    } else if (flag == "--world-size") {
      QR_ASSIGN_OR_RETURN(std::string v, value());
      QR_ASSIGN_OR_RETURN(o.world_size, ParseInt(flag, v, 2, 8));
      if (!IsSupportedWorldSize(o.world_size)) {
        return InvalidArgumentError("--world-size: " + v + " is not 2, 4 or 8");
      }
    } else if (flag == "--max-blocks") {
      QR_ASSIGN_OR_RETURN(std::string v, value());
      QR_ASSIGN_OR_RETURN(o.max_blocks, ParseInt(flag, v, 0, 65536));
    } else if (flag == "--eager-max-size") {
      QR_ASSIGN_OR_RETURN(std::string v, value());
      QR_ASSIGN_OR_RETURN(o.eager_max_bytes, ParseFlagSize(flag, v));
    } else if (flag == "--peer-bytes") {
      QR_ASSIGN_OR_RETURN(peer_bytes, value());
    } else if (flag == "--no-nccl") {
      QR_RETURN_IF_ERROR(no_value());
      o.nccl = false;
    } else if (flag == "--no-peer-bandwidth") {
      QR_RETURN_IF_ERROR(no_value());
      o.peer_bandwidth = false;
    } else if (flag == "--csv") {
      QR_ASSIGN_OR_RETURN(o.csv_path, value());
    } else if (flag == "--json") {
      QR_ASSIGN_OR_RETURN(o.json_path, value());
    } else if (flag == "--min-size-table") {
      QR_ASSIGN_OR_RETURN(o.min_size_table_path, value());
    } else if (flag == "--quick") {
      QR_RETURN_IF_ERROR(no_value());
      o.quick = true;
    } else if (flag == "--help" || flag == "-h") {
      o.help = true;
    } else {
      return InvalidArgumentError("unknown flag '" + args[i] + "' (see --help)");
    }
  }
  QR_ASSIGN_OR_RETURN(o.sizes, ParseSizes(sizes.value_or(o.quick ? kQuickSizes : kDefaultSizes)));
  QR_ASSIGN_OR_RETURN(o.dtypes, ParseDTypes(dtypes.value_or(o.quick ? "fp16,bf16" : "fp16,bf16,bf16cast")));
  QR_ASSIGN_OR_RETURN(o.modes, ParseModes(modes.value_or(o.quick ? "graph" : "graph,eager")));
  QR_ASSIGN_OR_RETURN(o.peer_bytes, ParseFlagSize("--peer-bytes", peer_bytes.value_or(o.quick ? "64M" : "256M")));
  QR_ASSIGN_OR_RETURN(o.regimes, ParseRegimes(regimes.value_or("FP,INT8,INT6,INT4,INT3")));
  // Canonical order whatever the command line said: tables read the same,
  // and bf16 is timed before bf16cast so its NCCL number can be reused.
  std::sort(o.regimes.begin(), o.regimes.end());
  std::sort(o.dtypes.begin(), o.dtypes.end());
  std::sort(o.modes.begin(), o.modes.end());
  const auto int3 = std::find(o.regimes.begin(), o.regimes.end(), Codec::kInt3);
  if (!CodecRunsAtWorldSize(Codec::kInt3, o.world_size) && int3 != o.regimes.end()) {
    if (regimes) {
      return InvalidArgumentError("--regimes: INT3 runs only at world size 2, not " +
                                  std::to_string(o.world_size));
    }
    o.regimes.erase(int3);
    o.notes.push_back("INT3 left out: it runs only at world size 2");
  }
  if (o.modes == std::vector<BenchMode>{BenchMode::kEager} && o.sizes.front() > o.eager_max_bytes) {
    return InvalidArgumentError("--modes eager: every size is above --eager-max-size " +
                                SizeName(o.eager_max_bytes) + ", nothing would be timed");
  }
  return o;
}

}  // namespace qr::bench
