// Pieces shared by qr-demo and the end-to-end tests: deterministic inputs that
// every rank can regenerate for every other rank, and the verdict on an
// all-reduce output (bit-identical to the reference of the algorithm that
// ran, and within the codec's proven bound of the exact sum).
#ifndef QR_TOOLS_QR_DEMO_LIB_H_
#define QR_TOOLS_QR_DEMO_LIB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/error_bound.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::demo {

// Fills `n` values of `dtype` for `rank`: blocks of 32 with magnitudes spread
// over 2^-6..2^6 (so quantization errors differ by block), some zero blocks
// and exact zeros. A pure function of (dtype, rank, seed, index); sums of up
// to 8 ranks stay finite in fp16.
void FillInput(DType dtype, int rank, uint64_t seed, int64_t n, uint16_t* out);

struct Verdict {
  bool bit_identical = false;   // equals ReferenceAllReduce's output
  int64_t first_mismatch = -1;  // first differing element, if not
  kernels::BoundCheck bound;    // vs the exact sum, with the codec's bound
  bool ok() const { return bit_identical && bound.violations == 0; }
  std::string Describe() const;  // one line for failures
};

// Regenerates every rank's input from `seed`, runs the reference of
// `algorithm` (ReferenceAllReduce, or ReferenceOneShotAllReduce, whose bound
// is FP's whatever p.codec says) and checks `output` (p.num_elems values).
// Thread-safe.
Verdict Verify(const kernels::TwoShotParams& p, uint64_t seed, const uint16_t* output,
               Algorithm algorithm = Algorithm::kTwoShot);

}  // namespace qr::demo

#endif  // QR_TOOLS_QR_DEMO_LIB_H_
