// A stand-in for a qr-bench worker in the launcher's tests
// (tools/bench_launch_test.cc): it speaks the side channel as a real worker
// does, without a GPU.
//
//   bench_fake_worker COORD RANK MODE [OUT]
//
// MODE ok: connects, gathers its rank's "r<rank>" with the others', checks
// every rank's line is there in rank order, broadcasts rank 0's "id-<...>"
// (as the NCCL id travels), writes what it received to OUT (when given) and
// exits 0. die: connects and exits 7 before any exchange. hang: connects and
// sleeps. three: as ok, then exits 3 (some cell failed). An exchange that
// fails exits 4 with the reason on stderr.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tools/bench_coord.h"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string path = argv[1], mode = argv[3];
  const int rank = std::atoi(argv[2]);
  auto c = qr::bench::CoordClient::Connect(path, rank);
  if (!c.ok()) {
    std::fprintf(stderr, "fake worker %d: %s\n", rank, c.status().ToString().c_str());
    return 5;
  }
  if (mode == "die") return 7;
  if (mode == "hang") {
    for (;;) ::pause();
  }
  auto all = c->AllGather("r" + std::to_string(rank));
  if (!all.ok()) {
    std::fprintf(stderr, "fake worker %d: %s\n", rank, all.status().ToString().c_str());
    return 4;
  }
  for (size_t r = 0; r < all->size(); ++r) {
    if ((*all)[r] != "r" + std::to_string(r)) return 6;
  }
  auto id = c->Broadcast(rank == 0 ? "id-" + qr::bench::HexEncode("\x01\x02") : "ignored");
  if (!id.ok()) {
    std::fprintf(stderr, "fake worker %d: %s\n", rank, id.status().ToString().c_str());
    return 4;
  }
  if (argc > 4) std::ofstream(argv[4]) << *id << " " << all->size() << "\n";
  return mode == "three" ? 3 : 0;
}
