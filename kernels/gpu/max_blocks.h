// The grid cap of the all-reduce kernels on a device: every rank of a group
// must use the same cap (it fixes the receive-buffer layout). Each launch
// further clamps its grid to the blocks of its kernel that are resident at
// once (kernels/gpu/rank_state.cu), because blocks wait on their peers' blocks.
#ifndef QR_KERNELS_GPU_MAX_BLOCKS_H_
#define QR_KERNELS_GPU_MAX_BLOCKS_H_

#include "common/status.h"

namespace qr::kernels {

// Multiprocessors x kTwoShotBlocksPerSm, at most kTwoShotMaxLayoutBlocks.
// kInternal/kUnavailable when the device cannot be queried.
[[nodiscard]] StatusOr<int> DefaultMaxBlocks(int device);

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_MAX_BLOCKS_H_
