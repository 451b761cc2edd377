// LocalGroup::LaunchResidualRmsNorm (local_group.h): the fused collective
// through the rank's RankState, as the GPU backend launches it.
#include "common/status_macros.h"
#include "kernels/gpu/local_group.h"

namespace qr::kernels {

Status LocalGroup::LaunchResidualRmsNorm(int rank, const LocalCall& call, const void* in,
                                         const ResidualRmsNormRequest& norm) {
  QR_ASSIGN_OR_RETURN(const std::vector<RankState>* states, States(call.timeout_ms));
  QR_RETURN_IF_ERROR(gpu::SetDevice(device(rank)));
  const Algorithm algorithm = call.one_shot ? Algorithm::kOneShot : Algorithm::kTwoShot;
  return (*states)[rank].LaunchResidualRmsNorm(
      {in, norm.norm_out, call.count, call.format, call.codec, algorithm}, norm,
      streams_[rank].get());
}

StatusOr<bool> LocalGroup::FusedOneLaunch(const LocalCall& call,
                                          const ResidualRmsNormRequest& norm) {
  QR_ASSIGN_OR_RETURN(const std::vector<RankState>* states, States(call.timeout_ms));
  const Algorithm algorithm = call.one_shot ? Algorithm::kOneShot : Algorithm::kTwoShot;
  return (*states)[0].FusedOneLaunch(
      {nullptr, norm.norm_out, call.count, call.format, call.codec, algorithm}, norm);
}

StatusOr<bool> LocalGroup::FusedSplitRows(const LocalCall& call,
                                          const ResidualRmsNormRequest& norm) {
  QR_ASSIGN_OR_RETURN(const std::vector<RankState>* states, States(call.timeout_ms));
  const Algorithm algorithm = call.one_shot ? Algorithm::kOneShot : Algorithm::kTwoShot;
  return (*states)[0].SplitRows(
      {nullptr, norm.norm_out, call.count, call.format, call.codec, algorithm}, norm);
}

}  // namespace qr::kernels
