#include <cstdio>
#include <string>

#include "tests/e2e/harness.h"
#include "tests/reliability/ranks.h"
#include "tests/reliability/subcommands.h"
#include "tests/reliability/support.h"

namespace qr::testing::reliability {

int ShmNeeds(const std::string& broker_bin, int device) {
  ScratchDir dir;
  Broker broker(broker_bin, dir.path(), {"QR_LOG_LEVEL=warn"});
  if (!broker.StartOrSay()) return 2;
  const std::string token = UniqueToken().substr(0, 8);
  std::printf("/dev/shm held by a READY group, %s backend (allocated blocks)\n",
              device < 0 ? "host" : "GPU");
  int rc = 0;
  for (int ws : {2, 4, 8}) {
    WorkerFlags f;
    f.group = "needs-" + token + "-" + std::to_string(ws);
    f.dir = dir.path();
    f.mode = "hold";
    f.world_size = ws;
    f.device = device;
    const uint64_t free_before = DevShmSpace().free;
    auto ranks = SpawnRanks(f);
    if (!ranks.ok() || !AllReady(*ranks, milliseconds(60000))) {
      std::printf("ws %d: the group did not form\n", ws);
      rc = 1;
    } else {
      uint64_t total = 0, segment = 0;
      std::vector<std::string> objects = ShmObjectsContaining(f.group);
      std::sort(objects.begin(), objects.end());
      for (const std::string& name : objects) {
        const uint64_t bytes = AllocatedBytes(name);
        total += bytes;
        // The segment's name is the shortest: data objects extend it.
        if (name.size() == objects.front().size()) segment += bytes;
      }
      const uint64_t dropped = free_before - DevShmSpace().free;
      std::printf(
          "ws %d: %zu objects, %s in all (statvfs: %s less free); segment %llu KiB, "
          "per rank %llu KiB\n",
          ws, objects.size(), MiB(total).c_str(), MiB(dropped).c_str(),
          static_cast<unsigned long long>(segment >> 10),
          static_cast<unsigned long long>((total - segment) / static_cast<uint64_t>(ws) >> 10));
    }
    WriteFile(dir.path() + "/" + f.group + "-stop", "1\n");
    if (ranks.ok()) {
      for (int code : WaitAll(ranks->pids, milliseconds(30000))) rc |= code != 0;
    }
  }
  return rc;
}

}  // namespace qr::testing::reliability
