// Test-only launchers of the FP8 output's conversion (kernels/gpu/
// fp8_output.cuh E4m3Chunk) on the current GPU, for fp8_gpu_test.cc.
// Errors: kInvalidArgument (a count not a multiple of 8), kInternal (GPU
// runtime).
#ifndef QR_TESTS_GPU_FP8_KERNELS_H_
#define QR_TESTS_GPU_FP8_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace qr::testing {

struct E4m3Sweep {
  uint64_t mismatches = 0;
  uint32_t first_bits = 0;  // the smallest fp32 bit pattern that differs (with mismatches)
};

// E4m3Chunk against kernels/float8.h's E4m3FromFloatBits for the fp32 bit
// patterns [first, first + count), eight to a chunk.
[[nodiscard]] StatusOr<E4m3Sweep> SweepE4m3Chunk(uint64_t first, uint64_t count);

// E4m3Chunk's codes of the fp32 values whose bits are bits[0 .. n) (n a
// multiple of 8) into codes[0 .. n).
[[nodiscard]] Status E4m3ChunkCodes(const uint32_t* bits, size_t n, uint8_t* codes);

}  // namespace qr::testing

#endif  // QR_TESTS_GPU_FP8_KERNELS_H_
