// A spinning barrier for host threads that must start together (the
// threaded launches of qr-kernel-cost, kernel_cost_options.h).
#ifndef QR_TOOLS_SPIN_BARRIER_H_
#define QR_TOOLS_SPIN_BARRIER_H_

#include <atomic>
#include <cstdint>

namespace qr::tools {

// A reusable barrier that spins: the threads it releases leave within a
// fraction of a microsecond of each other, where a condition variable wakes
// them one by one, tens of microseconds apart, which would add a start skew
// of its own to what the threaded launches measure. It yields now and then
// so that more threads than cores still get through.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  SpinBarrier(const SpinBarrier&) = delete;
  SpinBarrier& operator=(const SpinBarrier&) = delete;
  // Returns once n threads have called it in this round.
  void Wait();

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> round_{0};
};

}  // namespace qr::tools

#endif  // QR_TOOLS_SPIN_BARRIER_H_
