#include "kernels/gpu/max_blocks.h"

#include "common/status_macros.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"

namespace qr::kernels {

StatusOr<int> DefaultMaxBlocks(int device) {
  QR_ASSIGN_OR_RETURN(int sms, gpu::MultiprocessorCount(device));
  const int blocks = sms * kTwoShotBlocksPerSm;
  return blocks < kTwoShotMaxLayoutBlocks ? blocks : kTwoShotMaxLayoutBlocks;
}

}  // namespace qr::kernels
