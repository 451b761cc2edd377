// A tiny real GPU kernel that proves the toolchain: both GPU flavours compile
// it, and its host entry point links into ordinary C++ binaries and tests.
#ifndef QR_KERNELS_SAMPLE_SCALE_H_
#define QR_KERNELS_SAMPLE_SCALE_H_

#include <cstddef>

#include "common/status.h"

namespace qr::kernels {

// Number of usable GPUs; 0 when there is no driver or no device.
int SampleGpuCount();

// Multiplies `n` floats at `host` by `factor` on GPU 0 and copies them back.
// kUnavailable when there is no GPU, kInternal on a runtime error.
Status SampleScaleOnGpu(float* host, size_t n, float factor);

}  // namespace qr::kernels

#endif  // QR_KERNELS_SAMPLE_SCALE_H_
