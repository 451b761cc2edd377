#include "tools/bench_nccl_table.h"

#include <fmt/format.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace qr::bench {
namespace {

// nccl-tests' type names (ncclDataType_t as all_reduce_perf prints them).
const char* NcclTypeName(BenchDType dtype) {
  return dtype == BenchDType::kFp16 ? "half" : "bfloat16";
}

std::string Variant(const BenchRow& row) {
  if (row.algo == BenchAlgo::kNccl) return "NCCL ncclAllReduce";
  if (row.algo == BenchAlgo::kNcclSymm) return "NCCL ncclAllReduce, symmetric (window-registered)";
  if (row.algo == BenchAlgo::kTorchOneShot) return "PyTorch symm_mem one_shot_all_reduce";
  if (row.algo == BenchAlgo::kTorchTwoShot) return "PyTorch symm_mem two_shot_all_reduce_";
  if (row.algo == BenchAlgo::kOneShot) return "quickreduce one-shot (exact)";
  return "quickreduce two-shot " + row.regime;
}

}  // namespace

double AllReduceBusBandwidth(double algbw_gbps, int world_size) {
  if (world_size <= 0) return 0;
  return algbw_gbps * 2.0 * (world_size - 1) / world_size;
}

std::string NcclTestsTime(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string NcclTestsLine(const BenchRow& row, int world_size) {
  const size_t count = row.bytes / 2;  // fp16 and bf16: 2 bytes an element
  const double algbw = row.us > 0 ? static_cast<double>(row.bytes) / row.us / 1e3 : 0;
  return fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}  {:>7}  {:6.2f}  {:6.2f}  {:>5}\n",
                     row.bytes, count, NcclTypeName(row.dtype), "sum", -1, NcclTestsTime(row.us),
                     algbw, AllReduceBusBandwidth(algbw, world_size), "N/A");
}

std::string NcclTestsTable(const std::vector<BenchRow>& rows, int world_size) {
  using Key = std::tuple<std::string, BenchDType, BenchMode>;
  std::vector<std::pair<Key, std::string>> blocks;  // in first-seen order
  for (const BenchRow& row : rows) {
    if (row.algo == BenchAlgo::kPolicy || row.us <= 0) continue;
    const Key key{Variant(row), row.dtype, row.mode};
    auto it = blocks.begin();
    while (it != blocks.end() && it->first != key) ++it;
    if (it == blocks.end()) {
      blocks.emplace_back(key, "");
      it = blocks.end() - 1;
    }
    it->second += NcclTestsLine(row, world_size);
  }
  std::string out;
  for (const auto& [key, lines] : blocks) {
    const auto& [variant, dtype, mode] = key;
    out += fmt::format("# {}, {}{}, {}, world size {} (nccl-tests all_reduce_perf columns)\n",
                       variant, BenchDTypeName(dtype),
                       dtype == BenchDType::kBf16Cast ? " (reduced as fp16)" : "",
                       BenchModeName(mode), world_size);
    out +=
        "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       \n";
    out += lines;
    out += "\n";
  }
  return out;
}

}  // namespace qr::bench
