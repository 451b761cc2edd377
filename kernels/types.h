// The data path's vocabulary, shared by the host reference, the policy, the C
// ABI, the tools and the GPU kernels (constexpr only: nvcc and hip-clang read
// it too): the element type of a call, the format the algorithm works in, the
// codec (quantization regime) and the algorithm, with their names and the
// rule of which codec runs at which world size.
//
// DType and Codec values equal the C ABI's qr_dtype / qr_regime
// (comm/quickreduce.h), so a cast between them is the conversion. qr_regime's
// extra value NONE (5) is not a codec; it lives in comm/config.h as
// qr::Regime.
#ifndef QR_KERNELS_TYPES_H_
#define QR_KERNELS_TYPES_H_

#include <optional>
#include <string_view>

namespace qr {

// Element type of the user's buffers: raw IEEE binary16 or bfloat16 bits.
enum class DType : int { kFloat16 = 0, kBFloat16 = 1 };

// Wire format of a shard (a rank's share of a tile, kernels/geometry.h). kFp sends the 16-bit
// values themselves; the integer codecs send block-quantized codes (32 values share one scale).
enum class Codec : int { kFp = 0, kInt8 = 1, kInt6 = 2, kInt4 = 3, kInt3 = 4 };

inline constexpr int kNumCodecs = 5;
inline constexpr Codec kAllCodecs[kNumCodecs] = {Codec::kFp, Codec::kInt8, Codec::kInt6,
                                                 Codec::kInt4, Codec::kInt3};

// How values travel between ranks. kTwoShot (reduce-scatter, then all-gather;
// each codec quantizes twice) moves 2(ws-1)/ws of the message per rank and
// pays two hops; kOneShot (every rank pushes its whole input to every peer as
// exact 16-bit values and each rank sums all of them) moves (ws-1) messages
// per rank in one hop, so it wins for small messages. comm/policy.h picks.
enum class Algorithm : int { kTwoShot = 0, kOneShot = 1 };

// What a request computes on the data path: the same policy, backends,
// launcher, codecs and flags serve every kind (DESIGN.md "Collectives beyond
// the all-reduce"). kAllReduceResidualRmsNorm is the all-reduce followed by
// the residual add and RMSNorm of kernels/rmsnorm_reference.h.
enum class Collective : int {
  kAllReduce = 0,
  kReduceScatter = 1,
  kAllGather = 2,
  kAllReduceResidualRmsNorm = 3
};

constexpr const char* AlgorithmName(Algorithm a) {
  return a == Algorithm::kOneShot ? "one-shot" : "two-shot";
}

// "FP", "INT8", ... as in QR_QUANTIZATION; "?" for an out-of-range value.
constexpr const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kFp:
      return "FP";
    case Codec::kInt8:
      return "INT8";
    case Codec::kInt6:
      return "INT6";
    case Codec::kInt4:
      return "INT4";
    case Codec::kInt3:
      return "INT3";
  }
  return "?";
}

// The codec CodecName calls `name` ("FP", "INT8", ...); nullopt for any
// other text.
constexpr std::optional<Codec> CodecFromName(std::string_view name) {
  for (Codec codec : kAllCodecs) {
    if (name == CodecName(codec)) return codec;
  }
  return std::nullopt;
}

// "fp16" / "bf16"; "?" for an out-of-range value.
constexpr const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
  }
  return "?";
}

constexpr bool IsValidCodec(int value) { return value >= 0 && value < kNumCodecs; }
constexpr bool IsValidDType(int value) { return value == 0 || value == 1; }

// The type the algorithm works in: bf16 is reduced as fp16 when
// cast_bf16_to_fp16 is on (inputs cast with saturation, outputs cast back).
constexpr DType WorkDType(DType dtype, bool cast_bf16_to_fp16) {
  return (dtype == DType::kBFloat16 && cast_bf16_to_fp16) ? DType::kFloat16 : dtype;
}

// The format a call is reduced in, which is what selects a kernel: its input
// and output dtype and the arithmetic between them. kBf16Cast takes bf16 in,
// casts it to fp16 with saturation, reduces in fp16 and casts back to bf16.
enum class WorkFormat : int { kFp16 = 0, kBf16 = 1, kBf16Cast = 2 };

inline constexpr int kNumWorkFormats = 3;
inline constexpr WorkFormat kAllWorkFormats[kNumWorkFormats] = {
    WorkFormat::kFp16, WorkFormat::kBf16, WorkFormat::kBf16Cast};

// The work format of a call of `dtype` (the cast applies to bf16 only).
constexpr WorkFormat WorkFormatOf(DType dtype, bool cast_bf16_to_fp16) {
  if (dtype == DType::kFloat16) return WorkFormat::kFp16;
  return cast_bf16_to_fp16 ? WorkFormat::kBf16Cast : WorkFormat::kBf16;
}

// The dtype of the user's buffers, and the one the arithmetic runs in.
constexpr DType WorkFormatDType(WorkFormat f) {
  return f == WorkFormat::kFp16 ? DType::kFloat16 : DType::kBFloat16;
}
constexpr DType WorkFormatMathDType(WorkFormat f) {
  return f == WorkFormat::kBf16 ? DType::kBFloat16 : DType::kFloat16;
}

// "fp16", "bf16", "bf16cast"; "?" for an out-of-range value.
constexpr const char* WorkFormatName(WorkFormat f) {
  switch (f) {
    case WorkFormat::kFp16:
      return "fp16";
    case WorkFormat::kBf16:
      return "bf16";
    case WorkFormat::kBf16Cast:
      return "bf16cast";
  }
  return "?";
}

// Whether the two-shot algorithm runs `codec` at `world_size` (one of
// common/limits.h's): INT3 only at 2 (DESIGN.md; vLLM's quick-reduce has the
// same limit). One-shot never quantizes and runs whatever the codec.
constexpr bool CodecRunsAtWorldSize(Codec codec, int world_size) {
  return codec != Codec::kInt3 || world_size == 2;
}

// Bits per value of a codec's codes (16 for kFp), not counting scales.
constexpr int CodecBits(Codec codec) {
  switch (codec) {
    case Codec::kFp:
      return 16;
    case Codec::kInt8:
      return 8;
    case Codec::kInt6:
      return 6;
    case Codec::kInt4:
      return 4;
    case Codec::kInt3:
      return 3;
  }
  return 0;
}

}  // namespace qr

#endif  // QR_KERNELS_TYPES_H_
