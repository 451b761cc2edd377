// The row-split form of the fused all-reduce + residual add + RMSNorm
// (docs/fused.md, "The row-split form"): when the policy sends the
// all-reduce two-shot, each rank reduce-scatters whole token rows, finishes
// its rows exactly as the all-reduce would have delivered them, runs the
// epilogue on those rows only and all-gathers residual_out and norm_out
// (bits copied). constexpr only: nvcc, hip-clang and the host read it.
//
// When its `reduced` is the two-shot all-reduce's, bit for bit
// (kernels/two_shot_reference.h, reduce_scatter_reference.h,
// all_gather_reference.h; kernels/fused_split_reference_test.cc checks it):
//   - Equal chunks: tokens % world_size == 0, so rank r's rows are the
//     reduce-scatter's chunk r of n = tokens / ws * hidden values.
//   - FP: both sum every element in rank order in fp32 and round once to
//     the work dtype (after the same saturating bf16 -> fp16 cast); the
//     all-reduce's FP second hop moves those values unchanged and casts back
//     as the reduce-scatter's output does. Exact for every format.
//   - Integer codecs: phase 1 quantizes blocks of 32 values aligned to the
//     message, the reduce-scatter blocks of 32 aligned to each chunk; they
//     are the same blocks iff n % 32 == 0. The all-reduce then re-quantizes
//     the reduced shard (phase 2, blocks aligned to the message again) and
//     every rank, the owner too, outputs the decoded values. The owner
//     reproduces that with the phase-2 round trip of its chunk (encode and
//     decode in place, what the quantized all-gather does to its own chunk),
//     which starts from the reduced work-dtype values. With the bf16 cast
//     the reduce-scatter's output is those values cast back to bf16, which
//     loses bits the round trip needs, so the cast is excluded.
// Anything else keeps the all-reduce on every row.
#ifndef QR_KERNELS_FUSED_SPLIT_H_
#define QR_KERNELS_FUSED_SPLIT_H_

#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/types.h"

namespace qr::kernels {

// Whether the row split of `tokens` rows of `hidden` values (a positive
// multiple of 8) reproduces the two-shot all-reduce of (format, codec) at
// `world_size` bit for bit (the file comment's conditions).
constexpr bool SplitRowsExact(WorkFormat format, Codec codec, int64_t tokens, int64_t hidden,
                              int world_size) {
  if (world_size <= 0 || tokens <= 0 || hidden <= 0 || tokens % world_size != 0) return false;
  if (codec == Codec::kFp) return true;
  if (format == WorkFormat::kBf16Cast) return false;
  return (tokens / world_size * hidden) % kBlockElems == 0;
}

// Whether the owner must re-quantize its reduced rows (phase 2's round trip).
constexpr bool SplitRowsRoundTrip(Codec codec) { return codec != Codec::kFp; }

// Token rows each rank reduces and normalizes.
constexpr int64_t SplitRowsPerRank(int64_t tokens, int world_size) { return tokens / world_size; }

// Rank `rank`'s first row: chunk `rank` of the reduce-scatter.
constexpr int64_t SplitFirstRow(int64_t tokens, int world_size, int rank) {
  return int64_t{rank} * SplitRowsPerRank(tokens, world_size);
}

// Values per rank: the reduce-scatter's and the all-gathers' per-rank count.
constexpr int64_t SplitChunkElems(int64_t tokens, int64_t hidden, int world_size) {
  return SplitRowsPerRank(tokens, world_size) * hidden;
}

// Byte offset of rank `rank`'s rows in a [tokens, hidden] buffer of 16-bit
// values: where its reduce-scatter output, epilogue rows and all-gather
// inputs (the in-place forms) lie.
constexpr int64_t SplitRowsOffsetBytes(int64_t tokens, int64_t hidden, int world_size, int rank) {
  return SplitFirstRow(tokens, world_size, rank) * hidden * 2;
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_FUSED_SPLIT_H_
