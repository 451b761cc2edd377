// The grid cap when ranks of a group share a GPU (QR_ALLOW_SHARED_DEVICE
// under NVIDIA MPS, and LocalGroup's `gpus`): pure rules, no GPU runtime, so
// CI checks them on any machine.
//
// Block b of a rank waits on block b of every peer, so when ranks share a
// GPU all their blocks must be resident on it at once, or a block waits for
// one that never starts. Every rank of a group must compute the same cap.
#ifndef QR_KERNELS_GPU_MAX_BLOCKS_SHARED_H_
#define QR_KERNELS_GPU_MAX_BLOCKS_SHARED_H_

#include <string>
#include <vector>

namespace qr::kernels {

// How many ranks the busiest GPU carries: the largest number of equal
// entries in `device_ids` (one per rank, e.g. PCI bus ids). 0 when empty.
int MostRanksPerDevice(const std::vector<std::string>& device_ids);

// The grid cap of a group whose busiest GPU carries `ranks_per_gpu` ranks.
// `layout_blocks` is the cap of one rank per GPU (DefaultMaxBlocks:
// multiprocessors x kTwoShotBlocksPerSm, at most kTwoShotMaxLayoutBlocks),
// returned unchanged for ranks_per_gpu <= 1. Otherwise each rank gets an
// equal share of the blocks the FP two-shot kernels keep resident
// (kTwoShotFpBlocksPerSm per multiprocessor, the fewest of any kernel),
// derived from layout_blocks so that ranks agreeing on the buffer geometry
// agree on the cap; at least 1.
int SharedGpuMaxBlocks(int layout_blocks, int ranks_per_gpu);

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_MAX_BLOCKS_SHARED_H_
