// Device codecs for the two-shot kernel. A codec C<kBf16, kA> moves one
// thread's share of one rank shard (kA atoms of 8 values) to and from the
// wire, cooperating with the other threads of its block:
//   kShardWireBytes             wire bytes of one whole shard (all threads)
//   Encode(raw[kA], dst, tid, stage) stores the shard's wire form at dst
//     (stage: kTwoShotStageBytes of 16-byte aligned shared memory)
//   EncodeToAll<N>(raw, dst[N], tid, stage) the same to N destinations,
//     encoded once
//   Decode(src, tid, v[kA][8]) reads it back as exact float values
//   DecodePacked(src, tid, raw[kA]) the same values packed as 16-bit (Pack),
//     for the output
//   Accumulate(acc, x)        one step of the rank-order sum
//   kOverlapNextTile          whether the kernel sends the next tile's phase 1
//                             before waiting for this tile's phase 2
// Values are the math format (fp16 or bf16 bit patterns, kBf16 says which).
#ifndef QR_KERNELS_GPU_CODECS_CUH_
#define QR_KERNELS_GPU_CODECS_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/geometry.h"
#include "kernels/gpu/code_planes.h"
#include "kernels/gpu/two_shot_device.cuh"

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

  QR_DEVICE_INLINE static void Encode(const Vec16 (&raw)[kA], char* dst, int tid, char*) {
#pragma unroll
    for (int k = 0; k < kA; ++k)
      platform::StoreRemote16(dst + (k * kTwoShotThreads + tid) * 16, raw[k]);
  }

  template <int kN>
  QR_DEVICE_INLINE static void EncodeToAll(const Vec16 (&raw)[kA], char* const (&dst)[kN], int tid,
                                           char* stage) {
#pragma unroll
    for (int r = 0; r < kN; ++r) Encode(raw, dst[r], tid, stage);
  }

  QR_DEVICE_INLINE static void Decode(const char* src, int tid, float (&v)[kA][8]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      Unpack<kBf16>(platform::LoadShared16(src + (k * kTwoShotThreads + tid) * 16), v[k]);
    }
  }

  // Phase-2 shards hold Pack's output, which Pack(Unpack(.)) leaves as is.
  QR_DEVICE_INLINE static void DecodePacked(const char* src, int tid, Vec16 (&raw)[kA]) {
#pragma unroll
    for (int k = 0; k < kA; ++k)
      raw[k] = platform::LoadShared16(src + (k * kTwoShotThreads + tid) * 16);
  }

  QR_DEVICE_INLINE static float Accumulate(float acc, float x) { return platform::AddRn(acc, x); }
};

// ---------------------------------------------------------------------------
// Integer codecs: the wire layout of kernels/codec_layout.h, one atom row per
// atom index (thread t = atom t of the row). Arithmetic is the host reference's,
// one IEEE fp32 operation at a time.

// Lanes cooperate in groups of 32 (8 scale blocks) on both vendors.
inline constexpr int kLaneGroup = 32;
// Shared memory a block stages one encoded shard in: the largest integer
// codec's shard at the smallest world size (INT8 at 2: 4 rows of 2176 bytes).
inline constexpr int kTwoShotStageBytes = static_cast<int>(ShardWireBytes(Codec::kInt8, 2));

template <Codec kCodec, bool kBf16, int kA>
struct IntCodec {
  static_assert(kCodec != Codec::kFp, "FP has its own codec");
  static constexpr int kQ = CodeBias(kCodec);
  static constexpr size_t kRowBytes = static_cast<size_t>(AtomRowWireBytes(kCodec));
  static constexpr size_t kScaleOffset = static_cast<size_t>(ScaleOffset(kCodec));
  static constexpr size_t kHighOffset = static_cast<size_t>(HighPlaneOffset(kCodec));
  static constexpr uint32_t kScaleFactorBits = ScaleFactorBits(kCodec);
  static constexpr size_t kShardWireBytes = kRowBytes * kA;
  // Compute bound: overlapping the next tile's phase 1 with this tile's
  // phase-2 wait hides the wait (docs/performance.md, "Measurements behind
  // the kernels' choices").
  static constexpr bool kOverlapNextTile = true;
  static constexpr bool kPrefetchInput = false;
  static constexpr int kMinBlocksPerSm = kTwoShotMinBlocksPerSm;
  static_assert(kShardWireBytes <= kTwoShotStageBytes, "stage too small");
  static constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  static constexpr uint32_t kMagicBits = 0x4B400000u;
  // Bytes of this lane's atom in the low and the high code plane.
  static constexpr int kCodeBytes = LowPlaneAtomBytes(kCodec);
  static constexpr int kHighBytes = HighPlaneAtomBytes(kCodec);
  static constexpr bool kHasHigh = HasHighPlane(kCodec);
  static constexpr uint16_t kInf = kBf16 ? 0x7F80u : 0x7C00u;
  static constexpr uint16_t kNaN = kBf16 ? 0x7FC0u : 0x7E00u;

  // The scale word of the 32-value block this lane's atom belongs to
  // (collective over the 4 lanes of the block).
  QR_DEVICE_INLINE static uint32_t BlockScale(const Vec16& raw) {
    // Magnitude bits compare as unsigned integers (NaN above inf above
    // finite), two values per operation.
    uint32_t m2 = raw.w[0] & 0x7FFF7FFFu;
#pragma unroll
    for (int i = 1; i < 4; ++i) m2 = platform::MaxU16x2(m2, raw.w[i] & 0x7FFF7FFFu);
    m2 = platform::MaxU16x2(m2, platform::ShuffleXorU32(m2, 1, kLaneGroup));
    m2 = platform::MaxU16x2(m2, platform::ShuffleXorU32(m2, 2, kLaneGroup));
    const uint32_t m = max(m2 & 0xFFFFu, m2 >> 16);
    if (m >= kInf) return kNaN;
    if (kBf16 && m < uint32_t{kBf16NegligibleAbsmaxBits}) return 0;  // below 2^-100: negligible
    return m;
  }

  // The atom's unsigned codes u_j (1 .. 2Q-1), two per word in 16-bit lanes:
  // pairs[i] = u_{PairLo(i)} | u_{PairHi(i)} << 16. INT8 pairs neighbours
  // (its bytes are u_0..u_7 in order); the plane codecs pair even with even
  // and odd with odd (code_planes.h takes the even and the odd codes).
  QR_DEVICE_INLINE static constexpr int PairLo(int i) {
    return kCodec == Codec::kInt8 ? 2 * i : (i % 2) * 4 + i / 2;
  }
  QR_DEVICE_INLINE static constexpr int PairHi(int i) {
    return PairLo(i) + (kCodec == Codec::kInt8 ? 1 : 2);
  }
  QR_DEVICE_INLINE static void Quantize(const Vec16& raw, uint32_t scale, uint32_t (&pairs)[4]) {
    if (scale == 0 || scale >= kInf) {
#pragma unroll
      for (int i = 0; i < 4; ++i) pairs[i] = kQ * 0x00010001u;
      return;
    }
    const float d = platform::MulRn(ToFloat<kBf16>(static_cast<uint16_t>(scale)),
                                    __uint_as_float(kScaleFactorBits));
    const float e = platform::DivRn(1.0f, d);
    // Q + rint(v) for |v| < 2^22 is the low bits of v + (1.5 * 2^23 + Q)
    // rounded to nearest even (docs/codecs.md, "Equivalent forms"): |v| <= Q,
    // so the low 16 bits are u before the clamp, 0 .. 2Q. Two codes share a
    // word for the clamp to [1, 2Q-1] (kernels/codec.h's symmetric range).
    uint32_t bits[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t x = static_cast<uint16_t>(raw.w[j / 2] >> (16 * (j % 2)));
      const float v = platform::MulRn(ToFloat<kBf16>(x), e);
      bits[j] = __float_as_uint(platform::AddRn(v, kMagic + kQ));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      pairs[i] = platform::ClampU16x2(platform::BytePerm(bits[PairLo(i)], bits[PairHi(i)], 0x5410u),
                                      0x00010001u, (2 * kQ - 1) * 0x00010001u);
    }
  }

  // Writes this lane's atom (codes, high plane, and its block's scale from
  // the block's first lane) into `stage`, a shared-memory copy of the row.
  // The planes are built from the codes as bytes (code_planes.h); the low
  // bytes of two code pairs are four codes as bytes.
  QR_DEVICE_INLINE static void StageAtom(const Vec16& raw, char* stage, int tid) {
    const uint32_t scale = BlockScale(raw);
    uint32_t pairs[4];
    Quantize(raw, scale, pairs);
    const uint32_t bytes0 = platform::BytePerm(pairs[0], pairs[1], 0x6420u);
    const uint32_t bytes1 = platform::BytePerm(pairs[2], pairs[3], 0x6420u);
    if constexpr (kCodec == Codec::kInt8) {
      *reinterpret_cast<uint2*>(stage + 8 * tid) = make_uint2(bytes0, bytes1);
    } else {
      const CodePlanes planes = CodeBytesToPlanes<kCodec>(bytes0, bytes1);
      if constexpr (kCodec == Codec::kInt4) {
        *reinterpret_cast<uint32_t*>(stage + 4 * tid) = planes.lo;
      } else if constexpr (kCodec == Codec::kInt6) {
        *reinterpret_cast<uint32_t*>(stage + 4 * tid) = planes.lo;
        *reinterpret_cast<uint16_t*>(stage + kHighOffset + 2 * tid) =
            static_cast<uint16_t>(planes.hi);
      } else {
        *reinterpret_cast<uint16_t*>(stage + 2 * tid) = static_cast<uint16_t>(planes.lo);
        *reinterpret_cast<uint8_t*>(stage + kHighOffset + tid) = static_cast<uint8_t>(planes.hi);
      }
    }
    if (tid % 4 == 0) {
      *reinterpret_cast<uint16_t*>(stage + kScaleOffset + 2 * (tid / 4)) =
          static_cast<uint16_t>(scale);
    }
  }

  // Copies the wire bytes of this lane group's atoms (32 atoms: codes, high
  // plane, 8 scales) from the staged row to `row`, 16 bytes per lane.
  QR_DEVICE_INLINE static void CopyOut(const char* stage, char* row, int tid) {
    constexpr int kCodeChunks = kCodeBytes * kLaneGroup / 16;
    constexpr int kHighChunks = kHasHigh ? kHighBytes * kLaneGroup / 16 : 0;
    const int lane = tid % kLaneGroup;
    const int group = tid / kLaneGroup;
    size_t off;
    if (lane < kCodeChunks) {
      off = static_cast<size_t>(kCodeBytes) * kLaneGroup * group + 16 * lane;
    } else if (lane < kCodeChunks + kHighChunks) {
      off = kHighOffset + static_cast<size_t>(kHighBytes) * kLaneGroup * group +
            16 * (lane - kCodeChunks);
    } else if (lane == kCodeChunks + kHighChunks) {
      off = kScaleOffset + 16 * group;
    } else {
      return;
    }
    platform::StoreRemote16(row + off, *reinterpret_cast<const Vec16*>(stage + off));
  }

  // Stages the shard's kA rows in shared memory (collective over the
  // block's lane groups; each group touches only its own bytes).
  QR_DEVICE_INLINE static void Stage(const Vec16 (&raw)[kA], char* stage, int tid) {
    platform::WarpSync();  // earlier copies out of `stage` are done
#pragma unroll
    for (int k = 0; k < kA; ++k) StageAtom(raw[k], stage + k * kRowBytes, tid);
    platform::WarpSync();
  }

  QR_DEVICE_INLINE static void Encode(const Vec16 (&raw)[kA], char* dst, int tid, char* stage) {
    Stage(raw, stage, tid);
#pragma unroll
    for (int k = 0; k < kA; ++k) CopyOut(stage + k * kRowBytes, dst + k * kRowBytes, tid);
  }

  // The same shard to kN destinations, encoded once.
  template <int kN>
  QR_DEVICE_INLINE static void EncodeToAll(const Vec16 (&raw)[kA], char* const (&dst)[kN], int tid,
                                           char* stage) {
    Stage(raw, stage, tid);
#pragma unroll
    for (int r = 0; r < kN; ++r) {
#pragma unroll
      for (int k = 0; k < kA; ++k) CopyOut(stage + k * kRowBytes, dst[r] + k * kRowBytes, tid);
    }
  }

  QR_DEVICE_INLINE static void DecodeAtom(const char* row, int tid, float (&v)[8]) {
    const uint32_t scale = platform::LoadShared16Bits(row + kScaleOffset + 2 * (tid / 4));
    const float d = platform::MulRn(ToFloat<kBf16>(static_cast<uint16_t>(scale)),
                                    __uint_as_float(kScaleFactorBits));
    // c[j] = the bits of kMagic + u_j: u_j < 2^22 fills the magic
    // constant's zero low bits. With the codes one per byte, one byte
    // permutation per value moves a code under the magic constant's upper
    // bytes (selector: code byte, then bytes 5-7, i.e. 1-3 of kMagicBits).
    uint32_t c[8];
    if constexpr (kCodec == Codec::kInt8) {
      uint32_t lo, hi;
      platform::LoadShared64(row + 8 * tid, lo, hi);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[j] = platform::BytePerm(lo, kMagicBits, 0x7650u + j);
        c[j + 4] = platform::BytePerm(hi, kMagicBits, 0x7650u + j);
      }
    } else {
      uint32_t even, odd;  // byte k: code 2k, code 2k + 1
      CodesByByte(row, tid, even, odd);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[2 * j] = platform::BytePerm(even, kMagicBits, 0x7650u + j);
        c[2 * j + 1] = platform::BytePerm(odd, kMagicBits, 0x7650u + j);
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // (float)(u - Q), exactly: kMagic + kQ is exact in fp32.
      const float k = platform::AddRn(__uint_as_float(c[j]), -(kMagic + kQ));
      v[j] = platform::MulRn(k, d);
    }
  }

  // The atom's INT4/INT6/INT3 codes as bytes (code_planes.h).
  QR_DEVICE_INLINE static void CodesByByte(const char* row, int tid, uint32_t& even,
                                           uint32_t& odd) {
    if constexpr (kCodec == Codec::kInt4) {
      PlanesToCodeBytes<kCodec>(platform::LoadShared32(row + 4 * tid), 0, even, odd);
    } else if constexpr (kCodec == Codec::kInt6) {
      PlanesToCodeBytes<kCodec>(platform::LoadShared32(row + 4 * tid),
                                platform::LoadShared16Bits(row + kHighOffset + 2 * tid), even, odd);
    } else {
      PlanesToCodeBytes<kCodec>(platform::LoadShared16Bits(row + 2 * tid),
                                platform::LoadShared8Bits(row + kHighOffset + tid), even, odd);
    }
  }

  QR_DEVICE_INLINE static void Decode(const char* src, int tid, float (&v)[kA][8]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) DecodeAtom(src + k * kRowBytes, tid, v[k]);
  }

  QR_DEVICE_INLINE static void DecodePacked(const char* src, int tid, Vec16 (&raw)[kA]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      float v[8];
      DecodeAtom(src + k * kRowBytes, tid, v);
      raw[k] = Pack<kBf16>(v);
    }
  }

  QR_DEVICE_INLINE static float Accumulate(float acc, float x) { return platform::AddRn(acc, x); }
};

template <bool kBf16, int kA>
using Int8Codec = IntCodec<Codec::kInt8, kBf16, kA>;
template <bool kBf16, int kA>
using Int6Codec = IntCodec<Codec::kInt6, kBf16, kA>;
template <bool kBf16, int kA>
using Int4Codec = IntCodec<Codec::kInt4, kBf16, kA>;
template <bool kBf16, int kA>
using Int3Codec = IntCodec<Codec::kInt3, kBf16, kA>;

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODECS_CUH_
