// One worker of qr-bench --launch per-gpu (tools/bench_launch.h starts
// them): this process drives one GPU, as a serving process does.
//
//   quickreduce  joins its group through the broker (the C ABI, qr_join), twice:
//                a group whose one-shot ceiling is 0 for the two-shot cells and
//                one whose ceiling is the one-shot region for the one-shot
//                cells (QR_ONE_SHOT_MAX_KB set for each join), so that every
//                cell runs the algorithm it names; calls are qr_all_reduce_ex.
//   NCCL         ncclCommInitRank with the unique id rank 0 made and the
//                coordinator passed on (tools/bench_coord.h); ncclAllReduce on
//                plain buffers (classic) and on ncclMemAlloc buffers registered
//                with ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)
//                (symmetric kernels; skipped with the reason below NCCL 2.27).
//
// Timing is the single-process mode's (tools/bench_plan.h) per rank: events
// on the rank's own stream around each batch, every batch started after a
// barrier on the coordinator, rank 0's probe setting every rank's
// repetitions; a cell's time is the slowest rank's median. Every captured
// graph must have nodes (gpu::ScopedGraph::nodes), else the cell fails.
// Every rank agrees on each step's success before the next collective, so a
// rank that fails makes all skip the cell instead of hanging. Rank 0 writes
// the outputs (tools/bench_output.h).
//
// World size 1 runs the NCCL baselines (and merges PyTorch's): the calls,
// captures and outputs are those of the real sweep, without peers. On fewer
// GPUs than ranks (QR_ALLOW_SHARED_DEVICE=1, under MPS) rank r takes GPU
// r % GPUs and the NCCL baselines are skipped (NCCL refuses two ranks on one
// GPU), so quickreduce's path can be checked on one GPU.
#ifndef QR_TOOLS_BENCH_WORKER_H_
#define QR_TOOLS_BENCH_WORKER_H_

#include <string>

#include "tools/bench_options.h"

namespace qr::bench {

// The worker's exit status: rank 0 as RunBench's (0, 3 some cells failed,
// 1 fatal, 2 an output cannot be written); other ranks 0, or 1 when fatal.
int RunWorker(const BenchOptions& o, std::string command_line);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_WORKER_H_
