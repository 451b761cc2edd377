// Test-only launchers of kernels/gpu/packed_codec.cuh over host arrays of
// fp16x2 words, for packed_codec_gpu_test.cc: each copies the operands to the
// current GPU, applies one device function to every word, copies the result
// back and synchronizes. bits is 3, 4 or 6. Errors: kInternal (GPU runtime).
#ifndef QR_TESTS_GPU_PACKED_CODEC_KERNELS_H_
#define QR_TESTS_GPU_PACKED_CODEC_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace qr::testing {

enum class PackedOp { kQuantize, kDecode, kFusedReduce, kMultiplier, kScaleWord };

// out[i] = QuantizePair(a[i], b[i]) | DecodePair(a[i], b[i]) |
// FusedReducePair(a[i], b[i], c[i]) | the fp32 bits of PackedScaleOf(a[i])'s
// multiplier | the fp16 scale word the kernels make of its quotient
// (kernels/gpu/packed_scale.h; a[i] a block maximum); c is read only by
// kFusedReduce, b not by the last two.
[[nodiscard]] Status RunPackedOp(PackedOp op, int bits, const uint32_t* a, const uint32_t* b,
                                 const uint32_t* c, uint32_t* out, size_t n);

}  // namespace qr::testing

#endif  // QR_TESTS_GPU_PACKED_CODEC_KERNELS_H_
