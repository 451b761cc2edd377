#include "kernels/gpu/max_blocks_shared.h"

#include <algorithm>
#include <map>

#include "kernels/gpu/two_shot.h"

namespace qr::kernels {

int MostRanksPerDevice(const std::vector<std::string>& device_ids) {
  std::map<std::string, int> ranks;
  int most = 0;
  for (const std::string& id : device_ids) most = std::max(most, ++ranks[id]);
  return most;
}

int SharedGpuMaxBlocks(int layout_blocks, int ranks_per_gpu) {
  if (ranks_per_gpu <= 1) return layout_blocks;
  const int share = layout_blocks * kTwoShotFpBlocksPerSm / (kTwoShotBlocksPerSm * ranks_per_gpu);
  return std::max(share, 1);
}

}  // namespace qr::kernels
