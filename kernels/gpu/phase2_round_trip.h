// The two-shot all-reduce's phase-2 round trip on one rank's own values, for
// the row-split form of the fused collective (kernels/fused_split.h): every
// 32-value block of the chunk encoded with the codec and decoded back, in
// place, as the quantized all-gather outputs its own chunk (the same device
// codecs, the same tile view, kernels/gpu/collective_kernels.cuh). Host
// reference: RoundTripChunk (kernels/fused_split_reference.h). A local
// kernel: no peers, slots or flags.
#ifndef QR_KERNELS_GPU_PHASE2_ROUND_TRIP_H_
#define QR_KERNELS_GPU_PHASE2_ROUND_TRIP_H_

#include <cstddef>

#include "common/status.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/types.h"

namespace qr::kernels {

// Enqueues the round trip of `count` values (a multiple of 8) of `format`
// at `chunk` (device memory, 16-byte aligned) with `codec` as the two-shot
// at `world_size` quantizes them. format kBf16Cast is refused (the split
// form never needs it); INT3 needs world size 2. kInvalidArgument before
// the GPU is touched, kInternal on a launch error. count == 0 does nothing.
[[nodiscard]] Status LaunchPhase2RoundTrip(WorkFormat format, Codec codec, int world_size,
                                           void* chunk, size_t count, ::qr::gpu::Stream stream,
                                           bool overlap);

// Loads the kernel LaunchPhase2RoundTrip would launch, so that its first
// launch never loads a module after a collective kernel that waits for
// peers (LoadResidualRmsNormEpilogue, rmsnorm_epilogue.h, says why).
[[nodiscard]] Status LoadPhase2RoundTrip(WorkFormat format, Codec codec, int world_size);

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_PHASE2_ROUND_TRIP_H_
