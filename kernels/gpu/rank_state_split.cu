// RankState's row-split form of the fused collective (kernels/fused_split.h
// says when it gives the all-reduce's bits; kernels/fused_split_reference.h
// is the same sequence on the host, proved equal to the specification):
//   1. reduce-scatter of `in` by whole token rows into this rank's rows of
//      norm_out (with norm_out == in, the reduce-scatter's in-place form);
//   2. integer codecs: phase 2's quantize/dequantize round trip of those
//      rows, in place (kernels/gpu/phase2_round_trip.h), so they hold what
//      the two-shot all-reduce delivers;
//   3. the epilogue kernel on this rank's rows only: reduced from norm_out's
//      rows, residual_out's and norm_out's rows written;
//   4. all-gathers of residual_out and of norm_out, FP (bits copied), each in
//      place: this rank's rows are its input.
// Every kernel is one of the stream's, in order, so each step reads what the
// previous one wrote. The aliasing rules hold: the reduce-scatter has read
// all of `in` (and sent it to the peers' slots) before step 3 may write
// residual_out == in; residual's other rows, and in's, are overwritten by
// step 4 only after this rank's last read of them; no peer reads this
// rank's buffers (data moves through the receive slots only).
#include <hip/hip_runtime.h>

#include "common/status_macros.h"
#include "kernels/fused_split.h"
#include "kernels/gpu/collective_request.h"
#include "kernels/gpu/phase2_round_trip.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/gpu/rank_state_impl.cuh"
#include "kernels/gpu/rmsnorm_epilogue.h"
#include "kernels/types.h"

namespace qr::kernels {

bool RankState::SplitRows(const AllReduceRequest& request,
                          const ResidualRmsNormRequest& norm) const {
  // No FP8 output in this form (its all-gathers move dtype rows): such a
  // request runs the two launches.
  return norm.split_rows && norm.quant_out == nullptr && request.algorithm == Algorithm::kTwoShot &&
         request.collective == Collective::kAllReduce &&
         SplitRowsExact(request.format, request.codec, static_cast<int64_t>(norm.tokens),
                        static_cast<int64_t>(norm.hidden), impl_->config.world_size);
}

// Called by LaunchResidualRmsNorm after both requests were validated and the
// epilogue loaded.
Status RankState::LaunchSplitRows(const AllReduceRequest& request,
                                  const ResidualRmsNormRequest& norm,
                                  ::qr::gpu::Stream stream) const {
  const int ws = impl_->config.world_size;
  const int rank = impl_->config.rank;
  const auto tokens = static_cast<int64_t>(norm.tokens);
  const auto hidden = static_cast<int64_t>(norm.hidden);
  const auto n = static_cast<size_t>(SplitChunkElems(tokens, hidden, ws));
  const auto off = static_cast<size_t>(SplitRowsOffsetBytes(tokens, hidden, ws, rank));
  char* norm_rows = static_cast<char*>(norm.norm_out) + off;
  char* residual_rows = static_cast<char*>(norm.residual_out) + off;

  AllReduceRequest scatter = request;
  scatter.out = norm_rows;
  scatter.count = n;
  scatter.collective = Collective::kReduceScatter;
  const bool round_trip = SplitRowsRoundTrip(request.codec);
  ResidualRmsNormRequest rows = norm;
  rows.residual =
      norm.residual == nullptr ? nullptr : static_cast<const char*>(norm.residual) + off;
  rows.residual_out = residual_rows;
  rows.norm_out = norm_rows;
  rows.tokens = static_cast<size_t>(SplitRowsPerRank(tokens, ws));
  AllReduceRequest gather{
      residual_rows,       norm.residual_out,     n, WithoutCast(request.format), Codec::kFp,
      Algorithm::kTwoShot, Collective::kAllGather};

  // Every kernel validated and loaded before the first is enqueued: a rank's
  // reduce-scatter waits for its peers, and a load after it may wait for it.
  QR_RETURN_IF_ERROR(LoadKernel(scatter));
  QR_RETURN_IF_ERROR(LoadKernel(gather));
  QR_RETURN_IF_ERROR(ValidateResidualRmsNorm(rows));
  if (round_trip) QR_RETURN_IF_ERROR(LoadPhase2RoundTrip(request.format, request.codec, ws));

  QR_RETURN_IF_ERROR(Launch(scatter, stream));
  if (round_trip) {
    QR_RETURN_IF_ERROR(LaunchPhase2RoundTrip(request.format, request.codec, ws, norm_rows, n,
                                             stream, impl_->overlap));
  }
  QR_RETURN_IF_ERROR(LaunchResidualRmsNormEpilogue(rows, stream, impl_->overlap));
  QR_RETURN_IF_ERROR(Launch(gather, stream));
  gather.in = norm_rows;
  gather.out = norm.norm_out;
  return Launch(gather, stream);
}

}  // namespace qr::kernels
