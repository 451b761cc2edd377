// BoundedWait: the one way the host data path waits for another process.
//
// Every wait has a deadline and also polls an abort condition (the group's
// abort word), so a dead or stuck peer never hangs the caller. It spins
// briefly, then yields, then sleeps in short naps: with more ranks than CPU
// cores a pure spin would starve the very peer being waited for.
#ifndef QR_COMM_BOUNDED_WAIT_H_
#define QR_COMM_BOUNDED_WAIT_H_

#include <sched.h>
#include <time.h>

#include <chrono>
#include <string>

#include "common/status.h"

namespace qr {

using WaitClock = std::chrono::steady_clock;

// Waits until ready() returns true. Checks aborted() at least every ~100 µs
// and the deadline as often. Returns OK, kPeerFailed when aborted() became
// true first, kTimeout when the deadline passed first; `what` labels the
// message. ready() and aborted() must be cheap and side-effect free.
template <typename Ready, typename Aborted>
[[nodiscard]] Status BoundedWait(Ready&& ready, Aborted&& aborted, WaitClock::time_point deadline,
                                 const std::string& what) {
  for (int i = 0; i < 256; ++i) {
    if (ready()) return OkStatus();
  }
  const WaitClock::time_point start = WaitClock::now();
  for (unsigned iter = 0;; ++iter) {
    if (ready()) return OkStatus();
    if (aborted()) return PeerFailedError("group aborted while waiting for " + what);
    const WaitClock::time_point now = WaitClock::now();
    if (now >= deadline) {
      return TimeoutError("timed out waiting for " + what);
    }
    if (now - start < std::chrono::microseconds(200)) {
      ::sched_yield();
    } else {
      // Naps: a few tens of µs keeps latency low while giving the cores away.
      struct timespec nap = {0, now - start < std::chrono::milliseconds(5) ? 20000L : 100000L};
      ::nanosleep(&nap, nullptr);
    }
  }
}

}  // namespace qr

#endif  // QR_COMM_BOUNDED_WAIT_H_
