// qr-bench's results: from timed cells to report rows (the policy's pick,
// ratio to NCCL, link limit), the min-size table this machine should use, and
// the CSV / JSON / text renderings. Pure functions, no GPU: unit-tested on
// synthetic timings (tools/bench_report_test.cc).
//
//   std::vector<BenchRow> rows = BuildRows(measurements, o.regimes, ws, peer.LinkGBps());
//   MinSizeTable t = DeriveMinSizeTable(rows, ws);
//   WriteTextFile(path, t.text);
#ifndef QR_TOOLS_BENCH_REPORT_H_
#define QR_TOOLS_BENCH_REPORT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/config.h"
#include "common/status.h"
#include "kernels/types.h"
#include "tools/bench_options.h"
#include "tools/bench_plan.h"

namespace qr::bench {

// A timed cell: microseconds per all-reduce (> 0), and for a graph-mode cell
// the nodes of the captured graph (the slowest rank's graph: -1 unknown).
struct Measurement {
  BenchCell cell;
  double us = 0;
  int graph_nodes = -1;
};

// Peer-store bandwidth, GB/s (1e9 bytes/s) of stores leaving each GPU into
// its peers (kernels/gpu/peer_bandwidth.h), per rank: 16-byte stores from
// the threads, or TMA bulk copies (method "tma 16K", issue 18 item 8).
struct PeerBandwidth {
  std::string method = "sm";  // PeerStoreChoiceName
  size_t bytes = 0;           // per destination per rep
  int reps = 0;
  std::vector<double> concurrent_gbps;  // every rank storing at once (the all-reduce case)
  std::vector<double> alone_gbps;       // each rank storing while the others idle
  // The bandwidth link limits use: the slowest rank while all store at once
  // (a collective ends with its slowest rank); 0 when not measured.
  double LinkGBps() const;
};

struct BenchRow {
  size_t bytes = 0;
  BenchDType dtype = BenchDType::kFp16;
  BenchMode mode = BenchMode::kGraph;
  BenchAlgo algo = BenchAlgo::kTwoShot;
  std::string regime;            // "FP".."INT3"; one-shot: "FP" (exact values); NCCL: "-"
  double us = 0;                 // per call
  double algbw_gbps = 0;         // bytes / us
  double nccl_us = 0;            // 0: no baseline
  double ratio_vs_nccl = 0;      // us / nccl_us (< 1: faster than NCCL); 0 without baseline
  double link_limit_us = 0;      // wire bytes per GPU / link bandwidth; 0 without bandwidth
  double pct_of_link_limit = 0;  // 100 * link_limit_us / us
  std::string policy_choice;     // policy rows: "one-shot" or "two-shot"; else empty
  // quickreduce rows: the fastest baseline of the group (BenchAlgoName), its
  // time and us / its time; empty and 0 for baselines and where none was timed.
  std::string best_peer;
  double best_peer_us = 0;
  double ratio_vs_best_peer = 0;
  int graph_nodes = -1;  // the measurement's (JSON only)
};

// Bytes one GPU sends for an all-reduce of `bytes` bytes: two-shot
// 2 (ws-1)/ws * bytes * kernels::WireRatio(codec); one-shot (ws-1) * bytes (exact
// values, codec ignored).
double WireBytesPerGpu(Algorithm algo, Codec codec, size_t bytes, int world_size);
// WireBytesPerGpu / link_gbps, in microseconds; 0 when link_gbps <= 0.
double LinkLimitUs(Algorithm algo, Codec codec, size_t bytes, int world_size, double link_gbps);

// Rows for every measurement, grouped by (bytes, dtype, mode) in the order
// first seen: two-shot rows, the one-shot row, one policy row per regime in
// `regimes` whose pick was timed, then the baselines (NCCL, NCCL symmetric,
// torch one-shot, torch two-shot; each with its ratio to NCCL). Every
// quickreduce row names the fastest baseline of its group (best_peer). The
// policy is ChooseAlgorithm and
// EffectiveCodec (comm/policy.h) under `policy` (qr-bench: a default
// Config, i.e. the built-in one-shot ceilings); its rows copy the
// timed number. Baseline rows are compared with the link limit of two-shot FP
// (a ring moves the same bytes).
std::vector<BenchRow> BuildRows(const std::vector<Measurement>& measurements,
                                const std::vector<Codec>& regimes, int world_size, double link_gbps,
                                const Config& policy = Config{});

// The derived QR_MIN_SIZE_TABLE for one world size.
struct MinSizeTable {
  // Rows fp16, bf16 x FP..INT3, MiB; every entry is filled (measured or the
  // built-in value when the data is missing: see `measured`).
  std::array<std::array<int64_t, 5>, 2> mib{};
  std::array<std::array<bool, 5>, 2> measured{};
  // Largest measured size where one-shot beats two-shot FP (graph), per
  // BenchDType; -1 when not both were measured at some size.
  std::array<int64_t, 3> one_shot_wins_up_to_bytes{-1, -1, -1};
  // Suggested QR_ONE_SHOT_MAX_KB: the smallest of the above over the
  // measured dtypes, in KiB rounded down; -1 when nothing was measured.
  int64_t one_shot_max_kb = -1;
  // ParseMinSizeTable-compatible text: two rows plus '#' comment lines.
  std::string text;
};

// From graph-mode rows: per table row (fp16 from fp16, bf16 from bf16
// without the cast; bf16 with the cast uses the fp16 row, comm/policy.h) and
// regime, the smallest measured size S such that the policy's pick beats
// NCCL at S and at every larger measured size, in MiB rounded down (0 = no
// floor). When the pick does not beat NCCL at the largest measured size, the
// largest size in MiB + 1 (never taken at measured sizes), said in a comment.
// Sizes are those with an NCCL number; a size whose pick was not timed (e.g.
// one-shot skipped) ends the walk down, said in a comment. Without the pick at
// the largest size, `platform`'s built-in MinSizeBytes value, said in a
// comment. world_size must be 2, 4 or 8.
MinSizeTable DeriveMinSizeTable(const std::vector<BenchRow>& rows, int world_size,
                                Platform platform);

// CSV: header line, then one line per row (empty fields where a value is
// unknown), both with a trailing newline.
std::string CsvHeader();
std::string CsvLine(const BenchRow& row);

// The facts recorded with the rows in the JSON report.
struct BenchHeader {
  std::vector<std::string> gpus;
  int world_size = 0;
  int max_blocks = 0;
  std::string driver_runtime;  // as reported by the platform
  std::string nccl_version;    // empty: not loaded
  PeerBandwidth peer;          // SM stores: the link limits
  // --peer-tma-chunks: the same by TMA bulk copies, one per chunk size
  // (reported, never used for link limits).
  std::vector<PeerBandwidth> peer_tma;
  std::string timing_method;
  std::string command_line;
  std::string date;  // ISO 8601 UTC
  double wall_seconds = 0;
  std::vector<std::string> notes;
  std::vector<std::string> failures;  // cells that could not be timed, with why
};
// Pretty-printed JSON: {"header": {...}, "rows": [...], "min_size_table":
// {...}} with row fields named like the CSV columns.
std::string BenchJson(const BenchHeader& header, const std::vector<BenchRow>& rows,
                      const MinSizeTable& table);

// The human table: a header line for `regimes`, and one line per (bytes,
// dtype, mode) group of rows: NCCL us, one-shot and each two-shot codec as
// "us ratio link%", the policy's algorithm, and the fastest baseline other
// than NCCL with its time where one was timed ("nccl-symm 5.1").
std::string TableHeader(const std::vector<Codec>& regimes);
std::string TableLine(const std::vector<BenchRow>& group, const std::vector<Codec>& regimes);

// Writes `text` to `path` (replacing it). kInvalidArgument naming the path
// and the reason when it cannot be written.
[[nodiscard]] Status WriteTextFile(const std::string& path, const std::string& text);

// Now, UTC, as "2026-12-01T14:52:32Z": the date field of every run's header.
std::string UtcTimestamp();

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_REPORT_H_
