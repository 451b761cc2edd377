#include "tools/kernel_cost_peer_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "tools/bench_plan.h"
#include "tools/kernel_cost_format.h"

namespace qr::cost {

std::vector<PeerStoreCell> PlanPeerStoreCells(const CostOptions& o) {
  std::vector<PeerStoreCell> cells;
  for (size_t bytes : o.sizes) {
    for (int blocks : o.peer_blocks) {
      for (const bench::PeerStoreChoice& m : bench::PeerStoreChoices(o.peer_tma_chunks)) {
        cells.push_back({bytes, m, blocks});
      }
    }
  }
  return cells;
}

int PeerStoreGrid(const PeerStoreCell& cell, int multiprocessors) {
  return cell.blocks > 0 ? cell.blocks : 2 * multiprocessors;
}

PeerStoreResult SummarizePeerStore(const PeerStoreCell& cell, int destinations, int iters,
                                   std::vector<double> samples_us) {
  PeerStoreResult r;
  r.cell = cell;
  r.destinations = destinations;
  r.iters = iters;
  r.samples_us = std::move(samples_us);
  if (!r.samples_us.empty()) {
    r.best_us = *std::min_element(r.samples_us.begin(), r.samples_us.end());
    r.median_us = bench::Median(r.samples_us);
    r.gbps = GBps(cell.bytes * static_cast<size_t>(destinations), r.best_us);
  }
  return r;
}

void ComparePeerStoreToSm(std::vector<PeerStoreResult>& results) {
  for (PeerStoreResult& r : results) {
    r.vs_sm = 0;
    if (!r.error.empty() || r.gbps <= 0) continue;
    for (const PeerStoreResult& sm : results) {
      if (!sm.cell.method.tma && sm.error.empty() && sm.gbps > 0 && sm.cell.bytes == r.cell.bytes &&
          sm.cell.blocks == r.cell.blocks) {
        r.vs_sm = r.gbps / sm.gbps;
        break;
      }
    }
  }
}

std::string PeerStoreBanner(const CostRun& run) {
  const CostOptions& o = run.options;
  std::string s = fmt::format(
      "qr-kernel-cost --peer-store: rank 0's peer-store kernel writing the buffers of {} other "
      "rank(s), ALL ON ONE GPU ({}): this measures the SM/TMA issue side and HBM, NOT NVLink. "
      "Whether the kernels should use TMA bulk stores is decided on two GPUs by qr-bench "
      "--peer-tma-chunks (docs/performance.md, \"TMA bulk stores\").\n",
      o.world_size - 1, run.gpu.empty() ? "GPU 0" : run.gpu);
  s += fmt::format(
      "methods: sm = 16-byte stores from every thread; tma <chunk> = each block fills <chunk> "
      "bytes of shared memory and one thread issues a bulk copy, two buffers alternating; "
      "grid 0 = 2 x {} multiprocessors\n",
      run.multiprocessors);
  s += fmt::format(
      "method: per launch = elapsed of N back-to-back launches / N (GPU events), {} warm-up + {} "
      "timed repetitions; best and median; GB/s = bytes per destination x destinations / best; "
      "vs sm = GB/s / the SM stores' at the same size and grid\n",
      o.warmup, o.reps);
  return s;
}

std::string PeerStoreTableHeader() {
  return fmt::format("{:>8} {:>9} {:>6} {:>6} {:>11} {:>11} {:>9} {:>7}\n", "size", "method",
                     "blocks", "iters", "best us", "median us", "GB/s", "vs sm");
}

std::string PeerStoreTableLine(const CostRun& run, const PeerStoreResult& r) {
  const std::string head =
      fmt::format("{:>8} {:>9} {:>6} {:>6}", FormatBytes(r.cell.bytes, ByteStyle::kCompact),
                  bench::PeerStoreChoiceName(r.cell.method),
                  PeerStoreGrid(r.cell, run.multiprocessors), r.iters);
  if (!r.error.empty()) return head + "  FAILED: " + r.error + "\n";
  return head + fmt::format(" {:>11.2f} {:>11.2f} {:>9.1f} {:>7}\n", r.best_us, r.median_us, r.gbps,
                            r.vs_sm > 0 ? fmt::format("{:.3f}", r.vs_sm) : "-");
}

std::string PeerStoreCsvHeader() {
  return "what,bytes_per_destination,destinations,method,tma_chunk_bytes,blocks,iters,reps,"
         "best_us,median_us,gbps,vs_sm,error\n";
}

std::string PeerStoreCsvLine(const CostRun& run, const PeerStoreResult& r) {
  const bool ok = r.error.empty();
  const std::string error = CsvField(r.error);
  auto num = [ok](double v, int digits) {
    return ok ? fmt::format("{:.{}f}", v, digits) : std::string();
  };
  return fmt::format("peer-store,{},{},{},{},{},{},{},{},{},{},{},{}\n", r.cell.bytes,
                     r.destinations, r.cell.method.tma ? "tma" : "sm",
                     r.cell.method.tma ? std::to_string(r.cell.method.chunk_bytes) : "",
                     PeerStoreGrid(r.cell, run.multiprocessors), r.iters, r.samples_us.size(),
                     num(r.best_us, 3), num(r.median_us, 3), num(r.gbps, 2),
                     ok && r.vs_sm > 0 ? fmt::format("{:.4f}", r.vs_sm) : "", error);
}

std::string PeerStoreJson(const CostRun& run, const std::vector<PeerStoreResult>& results) {
  const CostOptions& o = run.options;
  nlohmann::json j;
  j["run"] = {
      {"what",
       "peer-store kernels, every rank on one GPU: the SM/TMA issue side and HBM, not NVLink"},
      {"world_size", o.world_size},
      {"gpu", run.gpu},
      {"multiprocessors", run.multiprocessors},
      {"tma_chunks", o.peer_tma_chunks},
      {"blocks", o.peer_blocks},
      {"reps", o.reps},
      {"warmup", o.warmup},
      {"iters", o.iters},
      {"command_line", run.command_line},
      {"date", run.date},
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const PeerStoreResult& r : results) {
    nlohmann::json row = {
        {"bytes_per_destination", r.cell.bytes},
        {"destinations", r.destinations},
        {"method", r.cell.method.tma ? "tma" : "sm"},
        {"tma_chunk_bytes", r.cell.method.chunk_bytes},
        {"blocks", PeerStoreGrid(r.cell, run.multiprocessors)},
        {"iters", r.iters},
        {"samples_us", r.samples_us},
    };
    if (r.error.empty()) {
      row["best_us"] = r.best_us;
      row["median_us"] = r.median_us;
      row["gbps"] = r.gbps;
      row["vs_sm"] = r.vs_sm > 0 ? nlohmann::json(r.vs_sm) : nlohmann::json(nullptr);
    } else {
      row["error"] = r.error;
    }
    rows.push_back(row);
  }
  j["results"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace qr::cost
