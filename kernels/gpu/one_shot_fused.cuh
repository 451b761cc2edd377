// Device-side interface of the one-launch fused one-shot kernel
// (one_shot_fused.cu): the all-reduce of the one-shot kernel, then on the
// token rows each block reduced, the residual add and RMSNorm of
// kernels/rmsnorm_reference.h. For rank_state_fused.cu, which launches it.
#ifndef QR_KERNELS_GPU_ONE_SHOT_FUSED_CUH_
#define QR_KERNELS_GPU_ONE_SHOT_FUSED_CUH_

#include <cstddef>

#include "kernels/gpu/one_shot_fused_slots.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

// Areas (one_shot_fused_slots.h) a block of the fused kernel keeps a phase
// for in shared memory: every area of the largest layout.
inline constexpr int kFusedMaxAreas = kTwoShotMaxLayoutBlocks;

struct FusedOneShotParams {
  KernelParams base;         // in, out (= norm_out), bytes and the one-shot fields
  const char* residual;      // tokens x hidden, or nullptr: none
  const char* weight;        // hidden
  char* residual_out;        // tokens x hidden
  char* quant_out;           // tokens x hidden e4m3 bytes, or nullptr: no FP8 output
  const float* quant_scale;  // with quant_out (device memory)
  size_t tokens;             // > 0
  size_t hidden;             // a positive multiple of kRmsNormChunkElems
  float eps;
  int slot_rows;             // FusedSlots::rows (the stride is base.oneshot_blocks)
  size_t lanes;              // TwoShotLayout::fused_lanes: this rank's lane inboxes in its buffer
  FusedLaunchConsts consts;  // FusedLaunchConstsOf(the launch's slots, tokens)
};

using FusedKernelFn = void (*)(FusedOneShotParams);

// Dynamic shared memory a block of `threads` threads, one of `parts` of a
// row, with `chunks_per_thread` chunks a thread takes: with one chunk, the
// squares of the threads past the part's lanes; with several, the weight.
size_t FusedSharedBytes(int threads, int parts, int chunks_per_thread);

// The kernel for (elem, ws, parts of a row: 1, 2, 4 or 8, chunks a thread:
// 1, or 2 or 4 with one part: FusedLaunchShape); nullptr if unsupported.
// kBf16Cast runs the bf16 kernel, as the plain one-shot kernel does (it
// moves exact values).
FusedKernelFn FusedOneShotKernelFor(WorkFormat elem, int ws, int parts, int chunks_per_thread);

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_ONE_SHOT_FUSED_CUH_
