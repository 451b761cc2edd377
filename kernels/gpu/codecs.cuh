// Device codecs for the two-shot kernel, in wire layout v2 (docs/codecs.md
// section 2). A codec C<kBf16, kA> moves one thread's share of one rank
// shard (kA atoms of 8 values) to and from the wire:
//   Wire                     this thread's wire words of the shard, in registers
//   kShardWireBytes          wire bytes of one whole shard (all threads)
//   Encode(raw[kA], tid)     the Wire of this thread's atoms (collective
//                            over the warp: block maxima, votes)
//   Store(w, dst, tid)       this thread's bytes of the shard at dst; every
//                            thread stores its own words straight to the
//                            destination (no staging)
//   Load(src, tid)           the Wire back from a received shard
//   Reduce<ws>(src[ws], out[kA]) the rank-order reduce of the sources' Wires
//                            (atom by atom: one atom's sum live at a time)
//   DecodeOut(w, sink)       the shard's values (work dtype) for the output:
//                            sink(k, atom) for k = 0..kA-1, one atom live
//                            at a time
//   kOverlapNextTile         whether the kernel sends the next tile's phase 1
//                            before waiting for this tile's phase 2
// Values are the math format (fp16 or bf16 bit patterns, kBf16 says which).
// Since the kernel can decode a Wire from its registers as well as from the
// wire, the owner of a shard never sends it to itself.
#ifndef QR_KERNELS_GPU_CODECS_CUH_
#define QR_KERNELS_GPU_CODECS_CUH_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/geometry.h"
#include "kernels/gpu/code_planes.h"
#include "kernels/gpu/packed_codec.cuh"
#include "kernels/gpu/packed_scale.h"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/packed_codec.h"

namespace qr::kernels::gpu {

// FP: raw 16-bit values, laid out on the wire as in the tile.
template <bool kBf16, int kA>
struct FpCodec {
  static constexpr size_t kShardWireBytes = static_cast<size_t>(kA) * kTwoShotThreads * 16;
  // FP is link bound: sending the next tile's phase 1 early only crowds the
  // link (docs/performance.md, "Measurements behind the kernels' choices").
  static constexpr bool kOverlapNextTile = false;
  // Instead, the next tile's input is loaded at the start of this one, so
  // its memory latency hides behind the tile's two phases (two blocks per
  // multiprocessor leave the registers for it).
  static constexpr bool kPrefetchInput = true;
  static constexpr int kMinBlocksPerSm = kTwoShotFpBlocksPerSm;

  struct Wire {
    Vec16 v[kA];
  };

  QR_DEVICE_INLINE static Wire Encode(const Vec16 (&raw)[kA], int) {
    Wire w;
#pragma unroll
    for (int k = 0; k < kA; ++k) w.v[k] = raw[k];
    return w;
  }

  QR_DEVICE_INLINE static void Store(const Wire& w, char* dst, int tid) {
#pragma unroll
    for (int k = 0; k < kA; ++k)
      platform::StoreRemote16(dst + (k * kTwoShotThreads + tid) * 16, w.v[k]);
  }

  QR_DEVICE_INLINE static Wire Load(const char* src, int tid) {
    Wire w;
#pragma unroll
    for (int k = 0; k < kA; ++k)
      w.v[k] = platform::LoadShared16(src + (k * kTwoShotThreads + tid) * 16);
    return w;
  }

  template <int kWs>
  QR_DEVICE_INLINE static void Reduce(const Wire (&src)[kWs], Vec16 (&out)[kA]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      float acc[8];
      Unpack<kBf16>(src[0].v[k], acc);
#pragma unroll
      for (int r = 1; r < kWs; ++r) {
        float v[8];
        Unpack<kBf16>(src[r].v[k], v);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = platform::AddRn(acc[e], v[e]);
      }
      out[k] = Pack<kBf16>(acc);
    }
  }

  // Phase-2 shards hold Pack's output, which Pack(Unpack(.)) leaves as is.
  template <class Sink>
  QR_DEVICE_INLINE static void DecodeOut(const Wire& w, Sink&& sink) {
#pragma unroll
    for (int k = 0; k < kA; ++k) sink(k, w.v[k]);
  }
};

// ---------------------------------------------------------------------------
// Integer codecs: layout v2 of a shard of kA atom rows. Thread t's kA atoms
// are contiguous in each code plane (atom k at t * lb * kA + k * lb of the
// low plane, likewise in the high plane), and block b's kA scale words are
// contiguous (row k at (b * kA + k) * 2 of the scale region), each stored
// with kScaleWireFlag set. So a thread stores (and loads) its code words as
// one piece per plane (INT4 at world size 2: 16 bytes), and lane t stores
// the scale of row t % 4 of its block (the lanes with t % 4 >= kA none): a
// warp's scale stores are contiguous.

// Stores and loads of one thread's piece of a plane: 2 to 32 bytes, as
// 32-bit words (the first holds the low bytes).
template <int kBytes>
QR_DEVICE_INLINE void StorePiece(char* p, const uint32_t* w) {
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16 || kBytes == 32);
  if constexpr (kBytes == 32) {
    platform::StoreRemote16(p, Vec16{{w[0], w[1], w[2], w[3]}});
    platform::StoreRemote16(p + 16, Vec16{{w[4], w[5], w[6], w[7]}});
  } else if constexpr (kBytes == 16) {
    platform::StoreRemote16(p, Vec16{{w[0], w[1], w[2], w[3]}});
  } else if constexpr (kBytes == 8) {
    platform::StoreRemote64(p, w[0], w[1]);
  } else if constexpr (kBytes == 4) {
    platform::StoreRemote32(p, w[0]);
  } else {
    platform::StoreRemote16Bits(p, w[0]);
  }
}

template <int kBytes>
QR_DEVICE_INLINE void LoadPiece(const char* p, uint32_t* w) {
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16 || kBytes == 32);
  if constexpr (kBytes >= 16) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const Vec16 v = platform::LoadShared16(p + 16 * i);
#pragma unroll
      for (int j = 0; j < 4; ++j) w[4 * i + j] = v.w[j];
    }
  } else if constexpr (kBytes == 8) {
    platform::LoadShared64(p, w[0], w[1]);
  } else if constexpr (kBytes == 4) {
    w[0] = platform::LoadShared32(p);
  } else {
    w[0] = platform::LoadShared16Bits(p);
  }
}

template <Codec kCodec, int kA>
struct IntLayout {
  static constexpr int kWs = kTwoShotAtoms / kA;
  static constexpr int kLowBytes = LowPlaneAtomBytes(kCodec);    // per atom
  static constexpr int kHighBytes = HighPlaneAtomBytes(kCodec);  // per atom
  static constexpr int kLowPiece = kLowBytes * kA;               // per thread
  static constexpr int kHighPiece = kHighBytes * kA;
  static constexpr int kScalePiece = kScaleBytes * kA;  // per block
  static constexpr int kLowWords = kLowPiece / 4;
  static constexpr int kHighWords = kHighPiece >= 4 ? kHighPiece / 4 : 1;
  static constexpr int kScaleWords = kScalePiece >= 4 ? kScalePiece / 4 : 1;
  static constexpr size_t kHighOffset = static_cast<size_t>(ShardHighPlaneOffset(kCodec, kWs));
  static constexpr size_t kScaleOffset = static_cast<size_t>(ShardScaleOffset(kCodec, kWs));
  static constexpr size_t kShardWireBytes = static_cast<size_t>(ShardWireBytes(kCodec, kWs));
  static_assert(kLowPiece >= 4 && kLowPiece % 4 == 0, "whole words of low plane per thread");
  static_assert(kScaleOffset + kAtomRowBlocks * kScalePiece == kShardWireBytes, "v2 shard size");
  static_assert(kShardWireBytes % 16 == 0, "shards keep 16-byte pieces aligned");

  // A thread's words of a shard; each scale half-word with the flag set.
  struct Words {
    uint32_t lo[kLowWords];
    uint32_t hi[kHighWords];
    uint32_t scale[kScaleWords];
  };

  QR_DEVICE_INLINE static void Clear(Words& w) {
#pragma unroll
    for (int i = 0; i < kLowWords; ++i) w.lo[i] = 0;
#pragma unroll
    for (int i = 0; i < kHighWords; ++i) w.hi[i] = 0;
#pragma unroll
    for (int i = 0; i < kScaleWords; ++i) w.scale[i] = 0;
  }

  // Row k's scale word (16 bits, flag set) and its value (flag masked).
  QR_DEVICE_INLINE static void SetScale(Words& w, int k, uint32_t scale) {
    w.scale[k / 2] |= (scale | kScaleWireFlag) << (16 * (k % 2));
  }
  QR_DEVICE_INLINE static uint32_t Scale(const Words& w, int k) {
    return (w.scale[k / 2] >> (16 * (k % 2))) & 0x7FFFu;
  }

  // Atom k's planes (INT4, INT6, INT3; code_planes.h's bit order).
  QR_DEVICE_INLINE static void SetPlanes(Words& w, int k, const CodePlanes& p) {
    if constexpr (kLowBytes == 4) {
      w.lo[k] = p.lo;
    } else {
      static_assert(kLowBytes == 2);
      w.lo[k / 2] |= p.lo << (16 * (k % 2));
    }
    if constexpr (kHighBytes == 2) {
      w.hi[k / 2] |= p.hi << (16 * (k % 2));
    } else if constexpr (kHighBytes == 1) {
      w.hi[k / 4] |= p.hi << (8 * (k % 4));
    }
  }
  // Atom k's planes, the bits above each plane word unspecified (SpreadPlanes
  // masks them).
  QR_DEVICE_INLINE static CodePlanes Planes(const Words& w, int k) {
    CodePlanes p;
    p.lo = kLowBytes == 4 ? w.lo[k] : w.lo[k / 2] >> (16 * (k % 2));
    if constexpr (kHighBytes == 2) {
      p.hi = w.hi[k / 2] >> (16 * (k % 2));
    } else if constexpr (kHighBytes == 1) {
      p.hi = w.hi[k / 4] >> (8 * (k % 4));
    }
    return p;
  }

  QR_DEVICE_INLINE static void Store(const Words& w, char* dst, int tid) {
    StorePiece<kLowPiece>(dst + tid * kLowPiece, w.lo);
    if constexpr (kHighPiece > 0)
      StorePiece<kHighPiece>(dst + kHighOffset + tid * kHighPiece, w.hi);
    const int j = tid % kAtomsPerBlock;
    if (j < kA) {
      uint32_t s = w.scale[0];
      if constexpr (kA == 4) s = (j & 2) ? w.scale[1] : s;
      if constexpr (kA >= 2) s = (j & 1) ? s >> 16 : s;
      platform::StoreRemote16Bits(dst + kScaleOffset + (tid / kAtomsPerBlock) * kScalePiece + 2 * j,
                                  s);
    }
  }

  QR_DEVICE_INLINE static Words Load(const char* src, int tid) {
    Words w;
    LoadPiece<kLowPiece>(src + tid * kLowPiece, w.lo);
    if constexpr (kHighPiece > 0) {
      LoadPiece<kHighPiece>(src + kHighOffset + tid * kHighPiece, w.hi);
    } else {
      w.hi[0] = 0;
    }
    LoadPiece<kScalePiece>(src + kScaleOffset + (tid / kAtomsPerBlock) * kScalePiece, w.scale);
    return w;
  }
};

// Lanes cooperate in groups of 32 (8 scale blocks) on both vendors.
inline constexpr int kLaneGroup = 32;

// The largest magnitude of the 32-value block this lane's atom belongs to,
// as bits (collective over the 4 lanes of the block). Magnitude bits compare
// as unsigned integers (NaN above inf above finite), two values per
// operation.
QR_DEVICE_INLINE uint32_t BlockAbsmaxBits(const Vec16& raw) {
  uint32_t m2 = raw.w[0] & 0x7FFF7FFFu;
#pragma unroll
  for (int i = 1; i < 4; ++i) m2 = platform::MaxU16x2(m2, raw.w[i] & 0x7FFF7FFFu);
  m2 = platform::MaxU16x2(m2, platform::ShuffleXorU32(m2, 1, kLaneGroup));
  m2 = platform::MaxU16x2(m2, platform::ShuffleXorU32(m2, 2, kLaneGroup));
  return max(m2 & 0xFFFFu, m2 >> 16);
}

// Q + rint(v) for |v| < 2^22 is the low bits of v + (1.5 * 2^23 + Q) rounded
// to nearest even (docs/codecs.md, "Equivalent forms").
inline constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
inline constexpr uint32_t kMagicBits = 0x4B400000u;

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

  // The scale word of the block this lane's atom belongs to (collective).
  QR_DEVICE_INLINE static uint32_t BlockScale(const Vec16& raw) {
    const uint32_t m = BlockAbsmaxBits(raw);
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

  QR_DEVICE_INLINE static Wire Encode(const Vec16 (&raw)[kA], int) {
    Wire w;
    L::Clear(w);
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      const uint32_t scale = BlockScale(raw[k]);
      uint32_t pairs[4];
      Quantize(raw[k], scale, pairs);
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
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      float acc[8];
      DecodeAtom(src[0], k, acc);
#pragma unroll
      for (int r = 1; r < kWs; ++r) {
        float v[8];
        DecodeAtom(src[r], k, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = platform::AddRn(acc[e], v[e]);
      }
      out[k] = Pack<kBf16>(acc);
    }
  }

  template <class Sink>
  QR_DEVICE_INLINE static void DecodeOut(const Wire& w, Sink&& sink) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      float v[8];
      DecodeAtom(w, k, v);
      sink(k, Pack<kBf16>(v));
    }
  }
};

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

  QR_DEVICE_INLINE static Wire Encode(const Vec16 (&raw)[kA], int tid) {
    uint32_t absmax[kA];
    bool fast = true;
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      absmax[k] = BlockAbsmaxBits(raw[k]);
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
#pragma unroll
      for (int k = 0; k < kA; ++k) {
        float acc[8];
        uint32_t x[4];
        DecodeAtom(src[0], k, x);
        Unpack<false>(Vec16{{x[0], x[1], x[2], x[3]}}, acc);
#pragma unroll
        for (int r = 1; r < kWs; ++r) {
          float v[8];
          DecodeAtom(src[r], k, x);
          Unpack<false>(Vec16{{x[0], x[1], x[2], x[3]}}, v);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[e] = platform::AddRn(acc[e], v[e]);
        }
        out[k] = Pack<false>(acc);
      }
    }
  }

  template <class Sink>
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
      sink(k, Vec16{{x[0], x[1], x[2], x[3]}});
    }
  }
};

// The integer codec of a work dtype: packed for INT6/INT4/INT3 on fp16.
template <Codec kCodec, bool kBf16, int kA>
using IntegerCodec =
    std::conditional_t<UsesPackedArithmetic(kCodec, kBf16 ? DType::kBFloat16 : DType::kFloat16),
                       PackedCodec<kCodec, kA>, IntCodec<kCodec, kBf16, kA>>;

template <bool kBf16, int kA>
using Int8Codec = IntegerCodec<Codec::kInt8, kBf16, kA>;
template <bool kBf16, int kA>
using Int6Codec = IntegerCodec<Codec::kInt6, kBf16, kA>;
template <bool kBf16, int kA>
using Int4Codec = IntegerCodec<Codec::kInt4, kBf16, kA>;
template <bool kBf16, int kA>
using Int3Codec = IntegerCodec<Codec::kInt3, kBf16, kA>;

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODECS_CUH_
