// Drives a fuzz target (LLVMFuzzerTestOneInput, linked in from the target's
// library) without libFuzzer, so CI's gcc build runs its checks: every seed,
// its truncations and byte mutations, then random noise, from a fixed RNG
// seed (a failure replays the same way).
#ifndef QR_IPC_FUZZ_REPLAY_DRIVER_H_
#define QR_IPC_FUZZ_REPLAY_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qr::fuzz {

struct ReplayPlan {
  uint32_t rng_seed = 1;
  size_t cut_step = 1;            // each seed cut at 0, step, 2 step, ... bytes
  int mutations_per_seed = 1000;  // copies with 1..max_flips bytes replaced
  int max_flips = 4;
  int noise_inputs = 10000;  // random inputs of 0..max_noise_bytes - 1 bytes
  size_t max_noise_bytes = 128;
  // Every other noise input has the high bit set in each byte (non-ASCII
  // text for decoders of UTF-8).
  bool high_bit_noise = false;
};

// The number of inputs passed to the target.
int ReplayThroughTarget(const std::vector<std::vector<uint8_t>>& seeds, const ReplayPlan& plan);

}  // namespace qr::fuzz

#endif  // QR_IPC_FUZZ_REPLAY_DRIVER_H_
