#include "tools/bench_output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

#include "comm/policy.h"
#include "kernels/platform/platform.h"
#include "tools/bench_nccl_table.h"

namespace qr::bench {

BenchOutput::~BenchOutput() {
  if (csv_ != nullptr) std::fclose(csv_);
}

Status BenchOutput::Open() {
  if (!o_.csv_path.empty()) {
    csv_ = std::fopen(o_.csv_path.c_str(), "w");
    if (csv_ == nullptr)
      return InvalidArgumentError(fmt::format("cannot write --csv {}", o_.csv_path));
    std::fputs(CsvHeader().c_str(), csv_);
    std::fflush(csv_);
  }
  for (const std::string* p : {&o_.json_path, &o_.min_size_table_path}) {
    if (!p->empty()) {
      if (Status s = WriteTextFile(*p, ""); !s.ok()) return s;
    }
  }
  return OkStatus();
}

void BenchOutput::AddBaselines(const std::vector<Measurement>& extra) {
  extra_.insert(extra_.end(), extra.begin(), extra.end());
}

void BenchOutput::Flush(std::vector<Measurement>& group) {
  if (group.empty()) return;
  const BenchCell& key = group[0].cell;
  for (const Measurement& m : extra_) {
    const BenchDType want = key.dtype == BenchDType::kBf16Cast ? BenchDType::kBf16 : key.dtype;
    if (m.cell.bytes != key.bytes || m.cell.mode != key.mode || m.cell.dtype != want) continue;
    Measurement copy = m;
    copy.cell.dtype = key.dtype;
    group.push_back(copy);
  }
  const auto rows = BuildRows(group, o_.regimes, o_.world_size, header_.peer.LinkGBps());
  if (csv_ != nullptr) {
    for (const BenchRow& r : rows) std::fputs(CsvLine(r).c_str(), csv_);
    std::fflush(csv_);
  }
  std::fputs(TableLine(rows, o_.regimes).c_str(), stdout);
  std::fflush(stdout);
  rows_.insert(rows_.end(), rows.begin(), rows.end());
  group.clear();
}

void BenchOutput::PrintPeerBandwidth() const {
  if (!o_.peer_bandwidth || header_.peer.concurrent_gbps.empty()) return;
  std::printf("%s\n",
              fmt::format("peer-store GB/s per GPU, all storing at once: {:.1f}; alone: {:.1f}  "
                          "(link limits use {:.1f})",
                          fmt::join(header_.peer.concurrent_gbps, " "),
                          fmt::join(header_.peer.alone_gbps, " "), header_.peer.LinkGBps())
                  .c_str());
  // TMA bulk copies (issue 18 item 8): the kernels should use them only if
  // they drive the link faster than the SM stores above.
  for (const PeerBandwidth& t : header_.peer_tma) {
    std::printf("%s\n", fmt::format("  by {}: all storing at once: {:.1f}; alone: {:.1f}  "
                                    "(slowest {:.1f} = {:.3f} x the SM stores')",
                                    t.method, fmt::join(t.concurrent_gbps, " "),
                                    fmt::join(t.alone_gbps, " "), t.LinkGBps(),
                                    t.LinkGBps() / header_.peer.LinkGBps())
                            .c_str());
  }
  std::printf("\n");
}

Status BenchOutput::Finish(double wall_seconds) {
  // The min-size table needs 2, 4 or 8 ranks (world size 1 has no policy).
  MinSizeTable table;
  if (o_.world_size >= 2) table = DeriveMinSizeTable(rows_, o_.world_size, GpuPlatform());
  // The same rows as nccl-tests prints them, to compare with its tables.
  std::printf("\n%s", NcclTestsTable(rows_, o_.world_size).c_str());
  if (!table.text.empty()) std::printf("\n%s", table.text.c_str());
  std::fflush(stdout);
  header_.wall_seconds = wall_seconds;
  // Write every output even when one fails; report the first failure.
  Status s = OkStatus();
  auto keep_first = [&s](Status next) {
    if (s.ok()) s = std::move(next);
  };
  if (!o_.min_size_table_path.empty())
    keep_first(WriteTextFile(o_.min_size_table_path, table.text));
  if (!o_.json_path.empty())
    keep_first(WriteTextFile(o_.json_path, BenchJson(header_, rows_, table)));
  if (csv_ != nullptr) {
    if (std::fclose(csv_) != 0)
      keep_first(InternalError(fmt::format("closing {} failed", o_.csv_path)));
    csv_ = nullptr;
  }
  return s;
}

std::vector<Measurement> RecordTorchRows(const StatusOr<TorchRows>& rows, BenchHeader& header) {
  if (!rows.ok()) {
    header.failures.push_back("torch baseline: " + rows.status().ToString());
    return {};
  }
  for (const std::string& r : rows->refused) header.notes.push_back("torch refused: " + r);
  for (const std::string& f : rows->failed) header.failures.push_back("torch: " + f);
  if (rows->measurements.empty() && rows->refused.empty()) {
    header.failures.push_back("torch baseline: no rows");
  }
  return rows->measurements;
}

}  // namespace qr::bench
