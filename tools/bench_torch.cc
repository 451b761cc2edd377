#include "tools/bench_torch.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/bytes.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace qr::bench {
namespace {

std::vector<std::string> SplitFields(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

}  // namespace

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return InvalidArgumentError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

StatusOr<TorchRows> ParseTorchCsv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return InvalidArgumentError("torch CSV: empty (no header)");
  const std::vector<std::string> header = SplitFields(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"bytes", "dtype", "mode", "op", "status", "us"}) {
    if (col.count(need) == 0) {
      return InvalidArgumentError(fmt::format("torch CSV: no column '{}' in '{}'", need, line));
    }
  }
  // The detail column (free text, maybe quoted with commas) is last: the
  // columns read here come before it.
  const size_t detail_col = col.count("detail") ? col["detail"] : header.size();
  TorchRows rows;
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::vector<std::string> f = SplitFields(line);
    auto field = [&](const char* name) { return f[col[name]]; };
    if (f.size() < header.size()) {
      return InvalidArgumentError(
          fmt::format("torch CSV line {}: {} fields, want {}", n, f.size(), header.size()));
    }
    BenchCell cell;
    const std::string op = field("op");
    if (op == BenchAlgoName(BenchAlgo::kTorchOneShot)) {
      cell.algo = BenchAlgo::kTorchOneShot;
    } else if (op == BenchAlgoName(BenchAlgo::kTorchTwoShot)) {
      cell.algo = BenchAlgo::kTorchTwoShot;
    } else {
      continue;  // torch-nccl, torch-one-shot-copy: not baselines here
    }
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(field("bytes").c_str(), &end, 10);
    if (field("bytes").empty() || *end != '\0' || bytes == 0) {
      return InvalidArgumentError(fmt::format("torch CSV line {}: bytes '{}'", n, field("bytes")));
    }
    cell.bytes = static_cast<size_t>(bytes);
    const std::string dtype = field("dtype"), mode = field("mode");
    if (dtype == "fp16") {
      cell.dtype = BenchDType::kFp16;
    } else if (dtype == "bf16") {
      cell.dtype = BenchDType::kBf16;
    } else {
      return InvalidArgumentError(fmt::format("torch CSV line {}: dtype '{}'", n, dtype));
    }
    if (mode == "graph") {
      cell.mode = BenchMode::kGraph;
    } else if (mode == "eager") {
      cell.mode = BenchMode::kEager;
    } else {
      return InvalidArgumentError(fmt::format("torch CSV line {}: mode '{}'", n, mode));
    }
    std::string detail;
    for (size_t i = detail_col; i < f.size(); ++i) detail += (i > detail_col ? "," : "") + f[i];
    const std::string what =
        fmt::format("{} {} {} {}: {}{}", FormatBytes(cell.bytes, ByteStyle::kCompact), dtype, mode,
                    op, field("status"), detail.empty() ? "" : ": " + detail);
    const std::string status = field("status");
    if (status == "ok") {
      const double us = std::strtod(field("us").c_str(), &end);
      if (field("us").empty() || *end != '\0' || !(us > 0)) {
        return InvalidArgumentError(
            fmt::format("torch CSV line {}: ok with us '{}'", n, field("us")));
      }
      rows.measurements.push_back({cell, us});
    } else if (status == "refused") {
      rows.refused.push_back(what);
    } else if (status == "failed" || status == "wrong") {
      rows.failed.push_back(what);
    } else {
      return InvalidArgumentError(fmt::format("torch CSV line {}: status '{}'", n, status));
    }
  }
  return rows;
}

std::vector<std::string> TorchCommand(const BenchOptions& o, const std::string& csv_path) {
  std::vector<std::string> sizes, dtypes, modes;
  for (size_t b : o.sizes) sizes.push_back(std::to_string(b));
  for (BenchDType d : o.dtypes) {
    const std::string name = d == BenchDType::kFp16 ? "fp16" : "bf16";  // bf16cast: bf16
    if (std::find(dtypes.begin(), dtypes.end(), name) == dtypes.end()) dtypes.push_back(name);
  }
  for (BenchMode m : o.modes) modes.push_back(BenchModeName(m));
  return {"/usr/bin/env",
          o.torch_python,
          o.torch_script,
          "--ops",
          "one-shot,two-shot",
          "--sizes",
          Join(sizes),
          "--dtypes",
          Join(dtypes),
          "--modes",
          Join(modes),
          "--eager-max-size",
          std::to_string(o.eager_max_bytes),
          "--world-size",
          std::to_string(o.world_size),
          "--timeout",
          std::to_string(std::max(10, o.launch_timeout_s - 10)),
          "--csv",
          csv_path};
}

StatusOr<TorchRows> RunTorchBaseline(const BenchOptions& o, const std::string& csv_path) {
  const std::vector<std::string> argv = TorchCommand(o, csv_path);
  std::string shown;
  for (size_t i = 1; i < argv.size(); ++i) shown += (i > 1 ? " " : "") + argv[i];
  std::fprintf(stderr, "qr-bench: torch baseline: %s\n", shown.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  QR_ASSIGN_OR_RETURN(const pid_t pid, Spawn(argv));
  StatusOr<int> rc = WaitExit(pid, std::chrono::seconds(o.launch_timeout_s));
  if (!rc.ok()) {
    ::kill(pid, SIGKILL);
    (void)WaitExit(pid, std::chrono::seconds(10));
    return TimeoutError(fmt::format("torch baseline still running after --launch-timeout {} s",
                                    o.launch_timeout_s));
  }
  if (*rc != 0 && *rc != 3) {
    return InternalError(fmt::format(
        "torch baseline: {} exited with {} (its output above says why)", o.torch_script, *rc));
  }
  QR_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(csv_path));
  return ParseTorchCsv(text);
}

}  // namespace qr::bench
