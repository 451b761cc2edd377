// RankState::LaunchResidualRmsNorm (rank_state.h): the fused collective's
// two launches on one stream, the all-reduce exactly as Launch enqueues it.
#include <string>

#include "common/status_macros.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/rmsnorm_lanes.h"
#include "kernels/types.h"

namespace qr::kernels {

Status RankState::LaunchResidualRmsNorm(const AllReduceRequest& request,
                                        const ResidualRmsNormRequest& norm,
                                        ::qr::gpu::Stream stream) const {
  if (request.out != norm.norm_out || request.count != norm.tokens * norm.hidden ||
      WorkFormatDType(request.format) != norm.dtype) {
    return InvalidArgumentError(
        "residual RMSNorm: the epilogue's norm_out, tokens x hidden and dtype must be the "
        "all-reduce's out, count and dtype");
  }
  if (norm.tokens == 0) return OkStatus();
  if (norm.hidden == 0 || norm.hidden % kRmsNormChunkElems != 0 || norm.weight == nullptr ||
      norm.residual_out == nullptr) {
    return InvalidArgumentError("residual RMSNorm: hidden " + std::to_string(norm.hidden) +
                                " not a positive multiple of 8, or a null buffer");
  }
  QR_RETURN_IF_ERROR(Launch(request, stream));
  return LaunchResidualRmsNormEpilogue(norm, stream);
}

}  // namespace qr::kernels
