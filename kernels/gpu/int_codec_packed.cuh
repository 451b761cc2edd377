// The integer codecs with the packed-fp16 arithmetic of docs/codecs.md
// section 9.1 (the codec contract: kernels/gpu/codecs.cuh).
#ifndef QR_KERNELS_GPU_INT_CODEC_PACKED_CUH_
#define QR_KERNELS_GPU_INT_CODEC_PACKED_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/gpu/int_wire.cuh"
#include "kernels/gpu/packed_codec.cuh"
#include "kernels/gpu/packed_scale.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/packed_codec.h"

namespace qr::kernels::gpu {

// --- Packed-fp16 arithmetic (kernels/packed_codec.h, docs/codecs.md section
// 9.1): INT6/INT4/INT3 when the work dtype is fp16. The fast path is one
// fp16x2 instruction per two values per step (packed_codec.cuh); a warp
// whose blocks are not all zero or inside packed::FastPathAbsmax (tiny
// maxima, large ones whose multiplier is subnormal, inf/NaN) encodes in fp32
// with the same numbers. Decoded values are fp16 already.
template <Codec kCodec, int kA>
struct PackedCodec {
  static_assert(kCodec == Codec::kInt6 || kCodec == Codec::kInt4 || kCodec == Codec::kInt3);
  using L = IntLayout<kCodec, kA>;
  using Wire = typename L::Words;
  static constexpr int kWs = L::kWs;
  static constexpr int kQ = CodeBias(kCodec);
  static constexpr PackedConstants kC = PackedConstantsFor(CodecBits(kCodec));
  static constexpr packed::AbsmaxRange kFast = packed::FastPathAbsmax(kCodec);
  static constexpr size_t kShardWireBytes = L::kShardWireBytes;
  static constexpr bool kOverlapNextTile = true;
  static constexpr bool kPrefetchInput = false;
  static constexpr int kMinBlocksPerSm = kTwoShotMinBlocksPerSm;
  static constexpr uint32_t kNaN2 = 0x7E007E00u;  // the canonical NaN, both halves

  // The exact slow path of one atom (fp32, every kind of block): its codes
  // as pairs and its scale word.
  QR_DEVICE_INLINE static uint32_t SlowQuantize(const Vec16& raw, uint32_t absmax,
                                                uint32_t (&pairs)[4]) {
    if (absmax == 0 || absmax >= kFp16Inf) {
#pragma unroll
      for (int m = 0; m < 4; ++m) pairs[m] = kQ * 0x00010001u;
      return absmax == 0 ? 0 : kFp16CanonicalNaN;
    }
    const PackedScale ps = PackedScaleOf(kCodec, absmax);
    // x * e has at most 22 significant bits: exact in fp32; |x e| < K, so
    // the magic sum's low 16 bits are Q + rint_even(x e).
    uint32_t bits[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t x = static_cast<uint16_t>(raw.w[j / 2] >> (16 * (j % 2)));
      const float v = platform::MulRn(platform::Fp16BitsToFloat(x), ps.multiplier);
      bits[j] = __float_as_uint(platform::AddRn(v, kMagic + kQ));
    }
#pragma unroll
    for (int m = 0; m < 4; ++m)
      pairs[m] = platform::BytePerm(bits[2 * m], bits[2 * m + 1], 0x5410u);
    return platform::FloatToFp16Bits(ps.quotient);
  }

  // The Wire of this thread's atoms of input in kIn (fp16, or bf16 to be
  // cast to it).
  template <WorkFormat kIn>
  QR_DEVICE_INLINE static Wire EncodeInput(const Vec16 (&in)[kA], int tid) {
    Vec16 raw[kA];
    uint32_t absmax[kA];
    bool fast = true;
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      absmax[k] = InputBlock<kIn>(in[k], raw[k]);
      fast = fast && (absmax[k] == 0 || (absmax[k] >= kFast.first && absmax[k] <= kFast.last));
    }
    Wire w;
    L::Clear(w);
    if (platform::WarpAll(fast)) {
      // Lane j of a block computes the multiplier and scale word of row
      // j % kA (the row whose scale it stores), and the block's lanes swap
      // them: two divisions per lane instead of 2 kA. A zero block gets
      // multiplier 0 (every code Q) and scale word 0.
      const int j = tid & (kA - 1);
      uint32_t mine = absmax[0];
#pragma unroll
      for (int k = 1; k < kA; ++k) mine = j == k ? absmax[k] : mine;
      const PackedScale ps = PackedScaleOf(kCodec, mine);
      const uint32_t both =
          mine == 0 ? 0u
                    : PackedMultiplierHalf(ps.multiplier) |
                          (static_cast<uint32_t>(platform::FloatToFp16Bits(ps.quotient)) << 16);
      const int first_lane = tid % kLaneGroup & ~(kAtomsPerBlock - 1);
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        const uint32_t row =
            kA == 1 ? both : platform::ShuffleU32(both, first_lane + k, kLaneGroup);
        const uint32_t e2 = (row & 0xFFFFu) * 0x00010001u;
        uint32_t pairs[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) pairs[m] = QuantizePair(kC, raw[k].w[m], e2);
        L::SetPlanes(w, k, PairsToPlanes<kCodec>(pairs));
        L::SetScale(w, k, row >> 16);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        uint32_t pairs[4];
        const uint32_t scale = SlowQuantize(raw[k], absmax[k], pairs);
        L::SetPlanes(w, k, PairsToPlanes<kCodec>(pairs));
        L::SetScale(w, k, scale);
      }
    }
    return w;
  }

  QR_DEVICE_INLINE static Wire Encode(const Vec16 (&raw)[kA], int tid) {
    return EncodeInput<WorkFormat::kFp16>(raw, tid);
  }

  QR_DEVICE_INLINE static void Store(const Wire& w, char* dst, int tid) { L::Store(w, dst, tid); }
  QR_DEVICE_INLINE static Wire Load(const char* src, int tid) { return L::Load(src, tid); }

  QR_DEVICE_INLINE static bool IsNaNScale(uint32_t scale) { return scale > kFp16Inf; }

  QR_DEVICE_INLINE static bool AnyNaNScale(const Wire& w) {
    bool nan = false;
#pragma unroll
    for (int k = 0; k < kA; ++k) nan = nan || IsNaNScale(L::Scale(w, k));
    return nan;
  }

  // x' of the atom's 8 values as fp16x2 words; under a NaN scale they are
  // NaN with unspecified payloads (DecodeOut makes them canonical).
  QR_DEVICE_INLINE static void DecodeAtom(const Wire& w, int k, uint32_t (&x)[4]) {
    const uint32_t d2 = L::Scale(w, k) * 0x00010001u;
    const CodePlanes spread = SpreadPlanes<kCodec>(L::Planes(w, k));
#pragma unroll
    for (int m = 0; m < 4; ++m) x[m] = DecodePair(kC, PairOf<kCodec>(spread, m), d2);
  }

  // World size 2: y = sat16(RN16((k1 / 2^s) d~1 + x'0)), one fma per two
  // values. Operands are finite unless a scale is NaN, so an infinite result
  // is an overflow, which saturates; a row with a NaN scale in either source
  // gives the canonical NaN. World sizes 4 and 8: the fp32 left fold of the
  // decoded values, rounded once (Pack: saturating; NaN, whatever the
  // hardware's payload, becomes the canonical NaN).
  template <int kN>
  QR_DEVICE_INLINE static void Reduce(const Wire (&src)[kN], Vec16 (&out)[kA]) {
    static_assert(kN == kWs);
    if constexpr (kWs == 2) {
      uint32_t nan_rows = 0;  // bit k: row k's result is NaN
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        if (IsNaNScale(L::Scale(src[0], k)) || IsNaNScale(L::Scale(src[1], k))) {
          nan_rows |= 1u << k;
        }
        const uint32_t d0 = L::Scale(src[0], k) * 0x00010001u;
        const uint32_t d1 = L::Scale(src[1], k) * 0x00010001u;
        const CodePlanes spread0 = SpreadPlanes<kCodec>(L::Planes(src[0], k));
        const CodePlanes spread1 = SpreadPlanes<kCodec>(L::Planes(src[1], k));
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const uint32_t x0 = DecodePair(kC, PairOf<kCodec>(spread0, m), d0);
          out[k].w[m] = SaturateInfPair(FusedReducePair(kC, PairOf<kCodec>(spread1, m), d1, x0));
        }
      }
      if (platform::WarpAny(nan_rows != 0)) {
#pragma unroll
        for (int k = 0; k < kA; ++k) {
          if (nan_rows & (1u << k)) {
#pragma unroll
            for (int m = 0; m < 4; ++m) out[k].w[m] = kNaN2;
          }
        }
      }
    } else {
      FoldInRankOrder<false, kWs>(
          [&](int r, int k, float(&v)[8]) {
            uint32_t x[4];
            DecodeAtom(src[r], k, x);
            Unpack<false>(Vec16{{x[0], x[1], x[2], x[3]}}, v);
          },
          out);
    }
  }

  // A row with a finite scale decodes to finite values or inf (finite code
  // values times a finite scale word), which OutFast casts exactly.
  template <WorkFormat kOut, class Sink>
  QR_DEVICE_INLINE static void DecodeOut(const Wire& w, Sink&& sink) {
    const bool any_nan = platform::WarpAny(AnyNaNScale(w));
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      uint32_t x[4];
      DecodeAtom(w, k, x);
      if (any_nan && IsNaNScale(L::Scale(w, k))) {
#pragma unroll
        for (int m = 0; m < 4; ++m) x[m] = kNaN2;
      }
      const Vec16 v{{x[0], x[1], x[2], x[3]}};
      if constexpr (kOut == WorkFormat::kBf16Cast) {
        sink(k, L::Scale(w, k) >= kFp16Inf ? Elem<kOut>::Out(v) : Elem<kOut>::OutFast(v));
      } else {
        sink(k, v);
      }
    }
  }
};

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_INT_CODEC_PACKED_CUH_
