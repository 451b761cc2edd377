// Which kernel runs a reduce-scatter or all-gather request on a GPU
// (kernels/gpu/collective_kernels.cuh), constexpr so that CI tests it
// without a GPU. The host references are the specification of the bits:
// ReduceScatterParamsFor / AllGatherParamsFor (kernels/reduce_scatter_
// reference.h, kernels/all_gather_reference.h) say that a call the policy
// sends one-shot moves exact values, and an FP all-gather copies bits (the
// bf16 cast ignored). A one-shot call whose wire fits the one-shot region
// runs the one-shot kernel (one_shot_collectives.cu), which moves exact
// values; any other call runs the phase kernel, which gives exactly those
// bits with the FP codec and the cast off.
#ifndef QR_KERNELS_GPU_COLLECTIVE_REQUEST_H_
#define QR_KERNELS_GPU_COLLECTIVE_REQUEST_H_

#include <cstdint>

#include "kernels/gpu/one_shot_collective_wire.h"
#include "kernels/types.h"

namespace qr::kernels {

// The work format and codec of a phase kernel.
struct PhaseKernelChoice {
  WorkFormat format = WorkFormat::kFp16;
  Codec codec = Codec::kFp;
};

// The format a call of `format` has with the bf16 cast off.
constexpr WorkFormat WithoutCast(WorkFormat format) {
  return format == WorkFormat::kBf16Cast ? WorkFormat::kBf16 : format;
}

// The phase kernel of a reduce-scatter or all-gather of (format, codec)
// that ChooseAlgorithm (comm/policy.h) sent `algorithm`:
//   reduce-scatter, kTwoShot: (format, codec) as asked;
//   reduce-scatter, kOneShot: FP with the cast off (exact values, one fp32
//     sum rounded once);
//   all-gather, FP or kOneShot: FP with the cast off (bits copied);
//   all-gather, a quantized codec, kTwoShot: (format, codec) as asked.
// Any other collective: (format, codec) unchanged.
constexpr PhaseKernelChoice CollectivePhaseKernel(Collective collective, WorkFormat format,
                                                  Codec codec, Algorithm algorithm) {
  const bool one_shot = algorithm == Algorithm::kOneShot;
  if (collective == Collective::kReduceScatter && one_shot) {
    return {WithoutCast(format), Codec::kFp};
  }
  if (collective == Collective::kAllGather && (one_shot || codec == Codec::kFp)) {
    return {WithoutCast(format), Codec::kFp};
  }
  return {format, codec};
}

// Whether a reduce-scatter or all-gather of `count` values per rank that
// ChooseAlgorithm sent `algorithm` runs the one-shot kernel: kOneShot and
// the wire fits (OneShotCollectiveFits). Otherwise the phase kernel of
// CollectivePhaseKernel runs it, whose bits are the same for kOneShot.
constexpr bool CollectiveRunsOneShot(Collective collective, Algorithm algorithm, int64_t count,
                                     int world_size) {
  return algorithm == Algorithm::kOneShot && OneShotCollectiveFits(collective, count, world_size);
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_COLLECTIVE_REQUEST_H_
