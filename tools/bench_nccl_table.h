// qr-bench's rows as nccl-tests' all_reduce_perf prints them, so that its
// numbers line up with (and parse like) the tables people already keep:
// size (B), count (elements), type, redop, root, time (us), algbw and busbw
// (GB/s), #wrong. busbw is nccl-tests' bus bandwidth for all-reduce,
// algbw * 2 (n-1) / n, which is comparable across world sizes. One block per
// timed variant (quickreduce one-shot, two-shot per codec, NCCL, NCCL
// symmetric, PyTorch symmetric memory's one-shot and two-shot) and dtype
// and mode, each with its own header; the policy's rows repeat a timed
// number and are left out. qr-bench does not check values, so #wrong is
// "N/A", as all_reduce_perf prints it with checking off (-c 0).
//
//   std::fputs(NcclTestsTable(rows, world_size).c_str(), stdout);
#ifndef QR_TOOLS_BENCH_NCCL_TABLE_H_
#define QR_TOOLS_BENCH_NCCL_TABLE_H_

#include <string>
#include <vector>

#include "tools/bench_report.h"

namespace qr::bench {

// nccl-tests' all-reduce bus bandwidth: algbw * 2 (world_size - 1) / world_size.
double AllReduceBusBandwidth(double algbw_gbps, int world_size);

// nccl-tests' time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f.
std::string NcclTestsTime(double us);

// One row in all_reduce_perf's out-of-place columns.
std::string NcclTestsLine(const BenchRow& row, int world_size);

// Every non-policy row, in blocks by (variant, dtype, mode) in the order first
// seen, each block under a '#' line naming it and nccl-tests' column header.
std::string NcclTestsTable(const std::vector<BenchRow>& rows, int world_size);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_NCCL_TABLE_H_
