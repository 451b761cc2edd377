// Test-only launchers of the bf16 cast's device conversions over host arrays
// of 32-bit words, for packed_cast_gpu_test.cc: each copies the words to the
// current GPU, applies one device function, copies the result back and
// synchronizes. Errors: kInvalidArgument (a size the op cannot take),
// kInternal (GPU runtime).
#ifndef QR_TESTS_GPU_PACKED_CAST_KERNELS_H_
#define QR_TESTS_GPU_PACKED_CAST_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace qr::testing {

enum class CastOp {
  kBf16x2ToFp16x2,  // per word: platform::Bf16x2ToFp16x2Rn
  kFp16x2ToBf16x2,  // per word: platform::Fp16x2ToBf16x2Rn
  kIn,              // per atom of 4 words: Elem<WorkFormat::kBf16Cast>::In
  kOut,             // per atom: Elem<WorkFormat::kBf16Cast>::Out
  kNonFinite,       // per atom: AnyNonFiniteHalf, as 0/1 in the atom's first word
  kInputBlock,      // per atom, thread i atom i: InputBlock<kBf16Cast>; absmax[i] its maximum
};

// `words` words of `in` into `out`; the atom ops need words % 4 == 0, and
// kInputBlock (collective over whole warps) words % 1024 == 0 and `absmax`
// with words / 4 entries (nullptr for the other ops).
[[nodiscard]] Status RunCastOp(CastOp op, const uint32_t* in, uint32_t* out, uint32_t* absmax,
                               size_t words);

}  // namespace qr::testing

#endif  // QR_TESTS_GPU_PACKED_CAST_KERNELS_H_
