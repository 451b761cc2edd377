// The grid cap of the two-shot kernel on a device: every rank of a group must
// use the same cap (it fixes the receive-buffer layout), and every block of a
// launch must be resident at once, because blocks wait on their peers' blocks.
#ifndef QR_KERNELS_GPU_MAX_BLOCKS_H_
#define QR_KERNELS_GPU_MAX_BLOCKS_H_

#include "common/status.h"

namespace qr::kernels {

// Multiprocessors x kTwoShotBlocksPerSm (the kernel's launch bounds keep that
// many resident). kInternal/kUnavailable when the device cannot be queried.
[[nodiscard]] StatusOr<int> DefaultMaxBlocks(int device);

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_MAX_BLOCKS_H_
