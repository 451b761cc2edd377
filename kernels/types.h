// The enums shared by the codecs, the two-shot algorithm, the policy and the
// C ABI: the element type of a call and the codec (quantization regime).
//
// Their values equal the C ABI's qr_dtype / qr_regime (comm/quickreduce.h), so a
// cast between them is the conversion. qr_regime's extra value NONE (5) is not a
// codec; it lives in comm/config.h as qr::Regime.
#ifndef QR_KERNELS_TYPES_H_
#define QR_KERNELS_TYPES_H_

#include <optional>
#include <string_view>

namespace qr {

// Element type of the user's buffers: raw IEEE binary16 or bfloat16 bits.
enum class DType : int { kFloat16 = 0, kBFloat16 = 1 };

// Wire format of a segment. kFp sends the 16-bit values themselves; the integer
// codecs send block-quantized codes (32 values share one scale).
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

constexpr const char* AlgorithmName(Algorithm a) {
  return a == Algorithm::kOneShot ? "one-shot" : "two-shot";
}

// "FP", "INT8", ... as in QR_QUANTIZATION; "?" for an out-of-range value.
constexpr const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kFp: return "FP";
    case Codec::kInt8: return "INT8";
    case Codec::kInt6: return "INT6";
    case Codec::kInt4: return "INT4";
    case Codec::kInt3: return "INT3";
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
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
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

// Bits per value of a codec's codes (16 for kFp), not counting scales.
constexpr int CodecBits(Codec codec) {
  switch (codec) {
    case Codec::kFp: return 16;
    case Codec::kInt8: return 8;
    case Codec::kInt6: return 6;
    case Codec::kInt4: return 4;
    case Codec::kInt3: return 3;
  }
  return 0;
}

}  // namespace qr

#endif  // QR_KERNELS_TYPES_H_
