#include <cstdio>
#include <string>
#include <vector>

#include "common/shm_object.h"
#include "common/status_macros.h"
#include "tests/reliability/subcommands.h"
#include "tests/reliability/support.h"

namespace qr::testing::reliability {

namespace {

// What a host join pays to reserve its buffer and a leave to free it:
// ShmMapping::Create (shm_open, posix_fallocate, mmap) and its destruction
// (munmap, shm_unlink), at the sizes a host rank could need.

}  // namespace

int ReserveCost(int repeat) {
  const std::string name = "/quickreduce-reliability-reserve-" + UniqueToken().substr(0, 8);
  for (int mib : {4, 8, 12, 20}) {
    std::vector<double> create_ms, free_ms;
    for (int i = 0; i < repeat; ++i) {
      const auto t0 = Clock::now();
      auto m = ShmMapping::Create(name, static_cast<size_t>(mib) << 20);
      const auto t1 = Clock::now();
      if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
        return 1;
      }
      { ShmMapping gone = std::move(m).value(); }
      const auto t2 = Clock::now();
      create_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      free_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    const Summary c = Summarise(create_ms), f = Summarise(free_ms);
    std::printf(
        "%2d MiB: reserve (create) min %.1f median %.1f max %.1f ms; free (unmap, "
        "unlink) min %.1f median %.1f max %.1f ms\n",
        mib, c.min, c.median, c.max, f.min, f.median, f.max);
  }
  return 0;
}

}  // namespace qr::testing::reliability
