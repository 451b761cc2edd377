// The integer codecs with the fp32 arithmetic of docs/codecs.md section 3
// (the codec contract: kernels/gpu/codecs.cuh).
#ifndef QR_KERNELS_GPU_INT_CODEC_FP32_CUH_
#define QR_KERNELS_GPU_INT_CODEC_FP32_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/gpu/int_wire.cuh"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

// --- fp32 arithmetic (docs/codecs.md section 3): INT8 for every work dtype,
// INT6/INT4/INT3 for bf16 without the cast. One IEEE fp32 operation at a
// time, as the host reference.
template <Codec kCodec, bool kBf16, int kA>
struct IntCodec {
  static_assert(kCodec != Codec::kFp, "FP has its own codec");
  using L = IntLayout<kCodec, kA>;
  using Wire = typename L::Words;
  static constexpr int kQ = CodeBias(kCodec);
  static constexpr uint32_t kScaleFactorBits = ScaleFactorBits(kCodec);
  static constexpr size_t kShardWireBytes = L::kShardWireBytes;
  // Compute bound: overlapping the next tile's phase 1 with this tile's
  // phase-2 wait hides the wait (docs/performance.md, "Measurements behind
  // the kernels' choices").
  static constexpr bool kOverlapNextTile = true;
  static constexpr bool kPrefetchInput = false;
  static constexpr int kMinBlocksPerSm = kTwoShotMinBlocksPerSm;
  static constexpr uint16_t kInf = kBf16 ? 0x7F80u : 0x7C00u;
  static constexpr uint16_t kNaN = kBf16 ? 0x7FC0u : 0x7E00u;

  // The scale word of a block whose largest magnitude has bits m.
  QR_DEVICE_INLINE static uint32_t BlockScale(uint32_t m) {
    if (m >= kInf) return kNaN;
    if (kBf16 && m < uint32_t{kBf16NegligibleAbsmaxBits}) return 0;  // below 2^-100: negligible
    return m;
  }

  // The atom's codes u_j (1 .. 2Q-1) as pairs: pairs[m] = u_{2m} | u_{2m+1} << 16.
  QR_DEVICE_INLINE static void Quantize(const Vec16& raw, uint32_t scale, uint32_t (&pairs)[4]) {
    if (scale == 0 || scale >= kInf) {
#pragma unroll
      for (int m = 0; m < 4; ++m) pairs[m] = kQ * 0x00010001u;
      return;
    }
    const float d = platform::MulRn(ToFloat<kBf16>(static_cast<uint16_t>(scale)),
                                    __uint_as_float(kScaleFactorBits));
    const float e = platform::DivRn(1.0f, d);
    // |v| <= Q, so the low 16 bits of the sum are u before the clamp, 0 ..
    // 2Q. Two codes share a word for the clamp to [1, 2Q-1] (kernels/codec.h's
    // symmetric range).
    uint32_t bits[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t x = static_cast<uint16_t>(raw.w[j / 2] >> (16 * (j % 2)));
      const float v = platform::MulRn(ToFloat<kBf16>(x), e);
      bits[j] = __float_as_uint(platform::AddRn(v, kMagic + kQ));
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      pairs[m] = platform::ClampU16x2(platform::BytePerm(bits[2 * m], bits[2 * m + 1], 0x5410u),
                                      0x00010001u, (2 * kQ - 1) * 0x00010001u);
    }
  }

  // The Wire of this thread's atoms of input in kIn (the work dtype, or
  // bf16 to be cast to it).
  template <WorkFormat kIn>
  QR_DEVICE_INLINE static Wire EncodeInput(const Vec16 (&in)[kA], int) {
    Wire w;
    L::Clear(w);
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      Vec16 raw;
      const uint32_t scale = BlockScale(InputBlock<kIn>(in[k], raw));
      uint32_t pairs[4];
      Quantize(raw, scale, pairs);
      L::SetScale(w, k, scale);
      if constexpr (kCodec == Codec::kInt8) {
        // One code per byte: bytes of the pairs' low halves.
        w.lo[2 * k] = platform::BytePerm(pairs[0], pairs[1], 0x6420u);
        w.lo[2 * k + 1] = platform::BytePerm(pairs[2], pairs[3], 0x6420u);
      } else {
        L::SetPlanes(w, k, PairsToPlanes<kCodec>(pairs));
      }
    }
    return w;
  }

  QR_DEVICE_INLINE static Wire Encode(const Vec16 (&raw)[kA], int tid) {
    return EncodeInput<(kBf16 ? WorkFormat::kBf16 : WorkFormat::kFp16)>(raw, tid);
  }

  QR_DEVICE_INLINE static void Store(const Wire& w, char* dst, int tid) { L::Store(w, dst, tid); }
  QR_DEVICE_INLINE static Wire Load(const char* src, int tid) { return L::Load(src, tid); }

  // Atom k's exact decoded values.
  QR_DEVICE_INLINE static void DecodeAtom(const Wire& w, int k, float (&v)[8]) {
    const float d = platform::MulRn(ToFloat<kBf16>(static_cast<uint16_t>(L::Scale(w, k))),
                                    __uint_as_float(kScaleFactorBits));
    // c[j] = the bits of kMagic + u_j: u_j < 2^22 fills the magic
    // constant's zero low bits, one byte permutation per value (selector:
    // the code's byte, then bytes 5-7, i.e. 1-3 of kMagicBits).
    uint32_t c[8];
    if constexpr (kCodec == Codec::kInt8) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[j] = platform::BytePerm(w.lo[2 * k], kMagicBits, 0x7650u + j);
        c[j + 4] = platform::BytePerm(w.lo[2 * k + 1], kMagicBits, 0x7650u + j);
      }
    } else {
      const CodePlanes spread = SpreadPlanes<kCodec>(L::Planes(w, k));
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const uint32_t pair = PairOf<kCodec>(spread, m);
        c[2 * m] = platform::BytePerm(pair, kMagicBits, 0x7650u);
        c[2 * m + 1] = platform::BytePerm(pair, kMagicBits, 0x7652u);
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // (float)(u - Q), exactly: kMagic + kQ is exact in fp32.
      const float code = platform::AddRn(__uint_as_float(c[j]), -(kMagic + kQ));
      v[j] = platform::MulRn(code, d);
    }
  }

  template <int kWs>
  QR_DEVICE_INLINE static void Reduce(const Wire (&src)[kWs], Vec16 (&out)[kA]) {
    FoldInRankOrder<kBf16, kWs>([&](int r, int k, float(&v)[8]) { DecodeAtom(src[r], k, v); }, out);
  }

  // A row with a finite scale decodes to finite values (finite codes times a
  // finite step, Pack saturating), which OutFast casts exactly.
  template <WorkFormat kOut, class Sink>
  QR_DEVICE_INLINE static void DecodeOut(const Wire& w, Sink&& sink) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      float v[8];
      DecodeAtom(w, k, v);
      const Vec16 x = Pack<kBf16>(v);
      if constexpr (kOut == WorkFormat::kBf16Cast) {
        sink(k, L::Scale(w, k) >= kInf ? Elem<kOut>::Out(x) : Elem<kOut>::OutFast(x));
      } else {
        sink(k, x);
      }
    }
  }
};

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_INT_CODEC_FP32_CUH_
