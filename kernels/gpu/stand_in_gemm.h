// A stand-in for the GEMM that precedes the all-reduce in a transformer layer
// (the row-parallel projection whose partial sums it reduces), for
// qr-kernel-cost: a grid of compute-bound blocks (a dependent chain of fp32
// multiply-adds per thread) that then signal dependents may start
// (platform::AllowDependentsToStart, as Hopper GEMMs do before their
// epilogue) and write `bytes` of finite values (0x3C3C: 1.06 as fp16,
// 0.0115 as bf16) to `out`. With it before the fused collective in a graph,
// programmatic dependent launch shows what it gains (docs/fused.md).
#ifndef QR_KERNELS_GPU_STAND_IN_GEMM_H_
#define QR_KERNELS_GPU_STAND_IN_GEMM_H_

#include <cstddef>

#include "common/status.h"
#include "kernels/platform/gpu_api.h"

namespace qr::kernels {

// Enqueues the kernel on `stream` (current device): `blocks` blocks of 256
// threads, `rounds` multiply-adds per thread. kInvalidArgument for bytes not
// a multiple of 16, a null out with bytes > 0, or blocks/rounds <= 0;
// kInternal on a launch error.
[[nodiscard]] Status LaunchStandInGemm(void* out, size_t bytes, int blocks, int rounds,
                                       ::qr::gpu::Stream stream);

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_STAND_IN_GEMM_H_
