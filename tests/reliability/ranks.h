// qr-reliability's rank processes: this binary run as `_worker`, spawned
// one per rank, reporting through files in a scratch directory.
#ifndef QR_TESTS_RELIABILITY_RANKS_H_
#define QR_TESTS_RELIABILITY_RANKS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tests/e2e/harness.h"
#include "tests/reliability/support.h"

namespace qr::testing::reliability {

struct WorkerFlags {
  std::string group, dir, mode = "stream";  // stream | hold
  int rank = 0, world_size = 2, device = kDeviceHost;
  int64_t count = 0;
  std::string regime = "FP";
};

std::string RankFile(const WorkerFlags& f, const std::string& what);

// stream: all-reduces until one fails (or 120 s), then records
//   <status code> <monotonic ns of the failure> <fds before Join> <fds after Leave> <message>
// hold: joins, runs one all-reduce, says so, waits for the stop file, leaves.
int Worker(const WorkerFlags& f);

struct Ranks {
  std::vector<pid_t> pids;
  WorkerFlags flags;
};

StatusOr<Ranks> SpawnRanks(const WorkerFlags& base);
// Waits until every rank has completed its first all-reduce; false at the
// timeout or as soon as a rank exited (it said why on stderr).
bool AllReady(const Ranks& ranks, milliseconds timeout);

}  // namespace qr::testing::reliability

#endif  // QR_TESTS_RELIABILITY_RANKS_H_
