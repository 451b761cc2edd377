#include "tools/spin_barrier.h"

#include <thread>

namespace qr::tools {

void SpinBarrier::Wait() {
  const uint64_t round = round_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
    // Reset before the release: a released thread may arrive for the next
    // round at once.
    arrived_.store(0, std::memory_order_relaxed);
    round_.store(round + 1, std::memory_order_release);
    return;
  }
  for (uint32_t spins = 1; round_.load(std::memory_order_acquire) == round; ++spins) {
    if ((spins & 0xFFFFu) == 0) std::this_thread::yield();
  }
}

}  // namespace qr::tools
