#include "kernels/fused_split_reference.h"

#include <vector>

#include "common/status_macros.h"
#include "kernels/all_gather_reference.h"
#include "kernels/codec_layout.h"
#include "kernels/collective_layout.h"
#include "kernels/fused_split.h"
#include "kernels/reduce_scatter_reference.h"
#include "kernels/rmsnorm_reference.h"

namespace qr::kernels {

void RoundTripChunk(const TwoShotParams& p, uint16_t* chunk) {
  if (!SplitRowsRoundTrip(p.codec)) return;
  std::vector<uint8_t> wire(static_cast<size_t>(ShardWireBytes(p.codec, p.world_size)));
  for (int64_t t = 0; t < CollectiveTiles(p.num_elems, p.world_size); ++t) {
    EncodeAllGatherShard(p, chunk, t, wire.data());
    DecodeAllGatherShard(p, wire.data(), t, /*source=*/0, chunk);
  }
}

Status ReferenceSplitResidualRmsNorm(const TwoShotParams& p, int64_t tokens, int64_t hidden,
                                     float eps, const uint16_t* const* inputs,
                                     const uint16_t* const* residual, const uint16_t* weight,
                                     uint16_t* const* residual_out, uint16_t* const* norm_out) {
  QR_RETURN_IF_ERROR(ValidateTwoShotParams(p));
  QR_RETURN_IF_ERROR(ValidateResidualRmsNormShape(p, tokens, hidden));
  const int ws = p.world_size;
  if (tokens % ws != 0) {
    return InvalidArgumentError("the row split needs tokens divisible by the world size");
  }
  TwoShotParams chunk = p;
  chunk.num_elems = SplitChunkElems(tokens, hidden, ws);
  const int64_t n = chunk.num_elems;
  // 1. Reduce-scatter by rows into each rank's rows of norm_out (with
  // norm_out == in, the reduce-scatter's in-place form).
  std::vector<uint16_t*> mine(static_cast<size_t>(ws));
  for (int r = 0; r < ws; ++r) mine[r] = norm_out[r] + r * n;
  QR_RETURN_IF_ERROR(ReferenceReduceScatter(chunk, inputs, mine.data()));
  for (int r = 0; r < ws; ++r) {
    // 2. The owner's rows as the all-reduce's phase 2 delivers them.
    RoundTripChunk(chunk, mine[r]);
    // 3. The epilogue on its rows only.
    // The rows as rank r holds them: the reduced values in norm_out.
    const ResidualRmsNormRows rows{p.dtype,     tokens, hidden,          eps,        norm_out[r],
                                   residual[r], weight, residual_out[r], norm_out[r]};
    ApplyResidualRmsNorm(rows, SplitFirstRow(tokens, ws, r), SplitRowsPerRank(tokens, ws));
  }
  // 4. Both outputs' rows to every rank, bits copied (in place: each rank's
  // input is its own rows of the output).
  TwoShotParams copy = chunk;
  copy.codec = Codec::kFp;
  copy.cast_bf16_to_fp16 = false;
  for (uint16_t* const* out : {residual_out, norm_out}) {
    std::vector<const uint16_t*> own(static_cast<size_t>(ws));
    for (int r = 0; r < ws; ++r) own[r] = out[r] + r * n;
    QR_RETURN_IF_ERROR(ReferenceAllGather(copy, own.data(), out));
  }
  return OkStatus();
}

}  // namespace qr::kernels
