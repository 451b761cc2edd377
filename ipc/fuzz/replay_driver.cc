#include "ipc/fuzz/replay_driver.h"

#include <random>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace qr::fuzz {

int ReplayThroughTarget(const std::vector<std::vector<uint8_t>>& seeds, const ReplayPlan& plan) {
  std::mt19937 rng(plan.rng_seed);
  int runs = 0;
  for (const auto& seed : seeds) {
    for (size_t cut = 0; cut <= seed.size(); cut += plan.cut_step, ++runs) {
      LLVMFuzzerTestOneInput(seed.data(), cut);
    }
    if (seed.empty()) continue;
    for (int i = 0; i < plan.mutations_per_seed; ++i, ++runs) {
      std::vector<uint8_t> m = seed;
      const int flips = 1 + static_cast<int>(rng() % static_cast<uint32_t>(plan.max_flips));
      for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<uint8_t>(rng());
      LLVMFuzzerTestOneInput(m.data(), m.size());
    }
  }
  for (int i = 0; i < plan.noise_inputs; ++i, ++runs) {
    std::vector<uint8_t> noise(rng() % plan.max_noise_bytes);
    const uint32_t high = plan.high_bit_noise && (i & 1) ? 0x80 : 0;
    for (auto& b : noise) b = static_cast<uint8_t>(rng() | high);
    LLVMFuzzerTestOneInput(noise.data(), noise.size());
  }
  return runs;
}

}  // namespace qr::fuzz
