// Device codecs for the two-shot kernel. A codec C<kBf16, kA> moves one
// thread's share of one rank segment (kA atoms of 8 values) to and from the
// wire, cooperating with the other threads of its block:
//   kSegWireBytes             wire bytes of one whole segment (all threads)
//   Encode(raw[kA], dst, tid) stores the segment's wire form at dst
//   EncodeToAll<N>(raw, dst[N], tid) the same to N destinations, encoded once
//   Decode(src, tid, v[kA][8]) reads it back as exact float values
//   Accumulate(acc, x)        one step of the rank-order sum
// Values are the math format (fp16 or bf16 bit patterns, kBf16 says which).
#ifndef QR_KERNELS_GPU_CODECS_CUH_
#define QR_KERNELS_GPU_CODECS_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

// FP: raw 16-bit values, laid out on the wire as in the tile.
template <bool kBf16, int kA>
struct FpCodec {
  static constexpr size_t kSegWireBytes = static_cast<size_t>(kA) * kTwoShotThreads * 16;

  QR_DEVICE_INLINE static void Encode(const Vec16 (&raw)[kA], char* dst, int tid) {
#pragma unroll
    for (int k = 0; k < kA; ++k) platform::StoreRemote16(dst + (k * kTwoShotThreads + tid) * 16, raw[k]);
  }

  template <int kN>
  QR_DEVICE_INLINE static void EncodeToAll(const Vec16 (&raw)[kA], char* const (&dst)[kN],
                                           int tid) {
#pragma unroll
    for (int r = 0; r < kN; ++r) Encode(raw, dst[r], tid);
  }

  QR_DEVICE_INLINE static void Decode(const char* src, int tid, float (&v)[kA][8]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      Unpack<kBf16>(platform::LoadShared16(src + (k * kTwoShotThreads + tid) * 16), v[k]);
    }
  }

  QR_DEVICE_INLINE static float Accumulate(float acc, float x) { return platform::AddRn(acc, x); }
};

// ---------------------------------------------------------------------------
// Integer codecs: the wire layout of kernels/codec.h, one atom row per atom
// index (thread t = atom t of the row). Arithmetic is the host reference's,
// one IEEE fp32 operation at a time.

// Lanes cooperate in groups of 32 (8 scale blocks) on both vendors.
inline constexpr int kLaneGroup = 32;

// Collects 16 bytes from 16 / kPieceBytes consecutive lanes, each giving a
// piece of kPieceBytes (1, 2 or 4) bytes in the low bits of `piece`. Returns
// true in the first lane of each group, which then owns `out`. Collective
// over the lane group.
template <int kPieceBytes>
QR_DEVICE_INLINE bool Gather16(uint32_t piece, int lane, Vec16& out) {
  constexpr int kN = 16 / kPieceBytes;
  const int base = lane & ~(kN - 1);
  out = Vec16{};
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const uint32_t v = platform::ShuffleU32(piece, base + i, kLaneGroup);
    const int off = i * kPieceBytes;
    out.w[off / 4] |= v << (8 * (off % 4));
  }
  return (lane & (kN - 1)) == 0;
}

// 8-byte pieces (lo, hi words): pairs of lanes.
QR_DEVICE_INLINE bool Gather16Pairs(uint32_t lo, uint32_t hi, int lane, Vec16& out) {
  const int base = lane & ~1;
  out.w[0] = platform::ShuffleU32(lo, base, kLaneGroup);
  out.w[1] = platform::ShuffleU32(hi, base, kLaneGroup);
  out.w[2] = platform::ShuffleU32(lo, base + 1, kLaneGroup);
  out.w[3] = platform::ShuffleU32(hi, base + 1, kLaneGroup);
  return (lane & 1) == 0;
}

QR_DEVICE_INLINE float ScaleFactorBits(GpuCodec c) {
  switch (c) {
    case GpuCodec::kInt8: return __uint_as_float(0x3C008081u);  // 1/127.5
    case GpuCodec::kInt6: return __uint_as_float(0x3D020821u);  // 1/31.5
    case GpuCodec::kInt4: return __uint_as_float(0x3E088889u);  // 1/7.5
    case GpuCodec::kInt3: return __uint_as_float(0x3E924925u);  // 1/3.5
    default: return 0.0f;
  }
}

template <GpuCodec kCodec, bool kBf16, int kA>
struct IntCodec {
  static constexpr int kBits = kCodec == GpuCodec::kInt8   ? 8
                               : kCodec == GpuCodec::kInt6 ? 6
                               : kCodec == GpuCodec::kInt4 ? 4
                                                           : 3;
  static constexpr int kQ = 1 << (kBits - 1);
  static constexpr size_t kRowBytes = kCodec == GpuCodec::kInt8   ? 2176
                                      : kCodec == GpuCodec::kInt6 ? 1664
                                      : kCodec == GpuCodec::kInt4 ? 1152
                                                                  : 896;
  static constexpr size_t kScaleOffset = kRowBytes - 64 * 2;
  static constexpr size_t kHighOffset = kCodec == GpuCodec::kInt6 ? 1024 : 512;
  static constexpr size_t kSegWireBytes = kRowBytes * kA;
  static constexpr uint16_t kInf = kBf16 ? 0x7F80u : 0x7C00u;
  static constexpr uint16_t kNaN = kBf16 ? 0x7FC0u : 0x7E00u;

  // The scale word of the 32-value block this lane's atom belongs to
  // (collective over the 4 lanes of the block).
  QR_DEVICE_INLINE static uint32_t BlockScale(const Vec16& raw) {
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      m = max(m, raw.w[i] & 0x7FFFu);
      m = max(m, (raw.w[i] >> 16) & 0x7FFFu);
    }
    m = max(m, platform::ShuffleXorU32(m, 1, kLaneGroup));
    m = max(m, platform::ShuffleXorU32(m, 2, kLaneGroup));
    if (m >= kInf) return kNaN;
    if (kBf16 && m < 0x0D80u) return 0;  // below 2^-100: negligible
    return m;
  }

  // Unsigned codes u_j (0 .. 2Q-1) of the atom's 8 values.
  QR_DEVICE_INLINE static void Quantize(const Vec16& raw, uint32_t scale, uint32_t (&u)[8]) {
    if (scale == 0 || scale >= kInf) {
#pragma unroll
      for (int j = 0; j < 8; ++j) u[j] = kQ;
      return;
    }
    const float d =
        platform::MulRn(ToFloat<kBf16>(static_cast<uint16_t>(scale)), ScaleFactorBits(kCodec));
    const float e = platform::DivRn(1.0f, d);
    // Symmetric range (kernels/codec.h): codes span [1, 2Q-1].
    const float lo = static_cast<float>(1 - kQ);
    const float hi = static_cast<float>(kQ - 1);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t x = static_cast<uint16_t>(raw.w[j / 2] >> (16 * (j % 2)));
      float k = platform::RintRn(platform::MulRn(ToFloat<kBf16>(x), e));
      k = k < lo ? lo : (k > hi ? hi : k);
      u[j] = static_cast<uint32_t>(static_cast<int>(k) + kQ);
    }
  }

  // One atom's wire form, gathered into the lanes that store it: `codes`
  // (and `high`, the second plane of INT6/INT3) and the 8 scales of the lane
  // group; the flags say whether this lane stores each.
  struct Encoded {
    Vec16 codes, high, scales;
    bool store_codes, store_high, store_scales;
  };

  // Collective over the lane group.
  QR_DEVICE_INLINE static Encoded EncodeAtom(const Vec16& raw, int tid) {
    const int lane = tid % kLaneGroup;
    const uint32_t scale = BlockScale(raw);
    uint32_t u[8];
    Quantize(raw, scale, u);
    Encoded e;
    e.store_high = false;
    if constexpr (kCodec == GpuCodec::kInt8) {
      const uint32_t lo = u[0] | (u[1] << 8) | (u[2] << 16) | (u[3] << 24);
      const uint32_t hi = u[4] | (u[5] << 8) | (u[6] << 16) | (u[7] << 24);
      e.store_codes = Gather16Pairs(lo, hi, lane, e.codes);
    } else if constexpr (kCodec == GpuCodec::kInt4) {
      uint32_t w = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) w |= u[j] << (4 * j);
      e.store_codes = Gather16<4>(w, lane, e.codes);
    } else if constexpr (kCodec == GpuCodec::kInt6) {
      uint32_t lo = 0, hi = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        lo |= (u[j] & 15u) << (4 * j);
        hi |= (u[j] >> 4) << (2 * j);
      }
      e.store_codes = Gather16<4>(lo, lane, e.codes);
      e.store_high = Gather16<2>(hi, lane, e.high);
    } else {
      uint32_t lo = 0, hi = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        lo |= (u[j] & 3u) << (2 * j);
        hi |= (u[j] >> 2) << j;
      }
      e.store_codes = Gather16<2>(lo, lane, e.codes);
      e.store_high = Gather16<1>(hi, lane, e.high);
    }
    // Scales of the 8 blocks of this lane group: every 8-lane leader gathers
    // the same 16 bytes; lane 0 stores them.
    const bool leader =
        Gather16<2>(platform::ShuffleU32(scale, (lane & 7) * 4, kLaneGroup), lane, e.scales);
    e.store_scales = leader && lane == 0;
    return e;
  }

  QR_DEVICE_INLINE static void StoreAtom(const Encoded& e, char* row, int tid) {
    constexpr int kCodeBytes = kCodec == GpuCodec::kInt8 ? 8 : kCodec == GpuCodec::kInt3 ? 2 : 4;
    constexpr int kHighBytes = kCodec == GpuCodec::kInt6 ? 2 : 1;
    if (e.store_codes) platform::StoreRemote16(row + kCodeBytes * tid, e.codes);
    if (e.store_high) platform::StoreRemote16(row + kHighOffset + kHighBytes * tid, e.high);
    if (e.store_scales) platform::StoreRemote16(row + kScaleOffset + 2 * (tid / 4), e.scales);
  }

  QR_DEVICE_INLINE static void DecodeAtom(const char* row, int tid, float (&v)[8]) {
    const uint32_t scale = platform::LoadShared16Bits(row + kScaleOffset + 2 * (tid / 4));
    const float d =
        platform::MulRn(ToFloat<kBf16>(static_cast<uint16_t>(scale)), ScaleFactorBits(kCodec));
    uint32_t u[8];
    if constexpr (kCodec == GpuCodec::kInt8) {
      uint32_t lo, hi;
      platform::LoadShared64(row + 8 * tid, lo, hi);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        u[j] = (lo >> (8 * j)) & 255u;
        u[j + 4] = (hi >> (8 * j)) & 255u;
      }
    } else if constexpr (kCodec == GpuCodec::kInt4) {
      const uint32_t w = platform::LoadShared32(row + 4 * tid);
#pragma unroll
      for (int j = 0; j < 8; ++j) u[j] = (w >> (4 * j)) & 15u;
    } else if constexpr (kCodec == GpuCodec::kInt6) {
      const uint32_t lo = platform::LoadShared32(row + 4 * tid);
      const uint32_t hi = platform::LoadShared16Bits(row + kHighOffset + 2 * tid);
#pragma unroll
      for (int j = 0; j < 8; ++j) u[j] = ((lo >> (4 * j)) & 15u) | (((hi >> (2 * j)) & 3u) << 4);
    } else {
      const uint32_t lo = platform::LoadShared16Bits(row + 2 * tid);
      const uint32_t hi = platform::LoadShared8Bits(row + kHighOffset + tid);
#pragma unroll
      for (int j = 0; j < 8; ++j) u[j] = ((lo >> (2 * j)) & 3u) | (((hi >> j) & 1u) << 2);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[j] = platform::MulRn(static_cast<float>(static_cast<int>(u[j]) - kQ), d);
    }
  }

  QR_DEVICE_INLINE static void Encode(const Vec16 (&raw)[kA], char* dst, int tid) {
#pragma unroll
    for (int k = 0; k < kA; ++k) StoreAtom(EncodeAtom(raw[k], tid), dst + k * kRowBytes, tid);
  }

  // The same segment to kN destinations, encoded once.
  template <int kN>
  QR_DEVICE_INLINE static void EncodeToAll(const Vec16 (&raw)[kA], char* const (&dst)[kN],
                                           int tid) {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      const Encoded e = EncodeAtom(raw[k], tid);
#pragma unroll
      for (int r = 0; r < kN; ++r) StoreAtom(e, dst[r] + k * kRowBytes, tid);
    }
  }

  QR_DEVICE_INLINE static void Decode(const char* src, int tid, float (&v)[kA][8]) {
#pragma unroll
    for (int k = 0; k < kA; ++k) DecodeAtom(src + k * kRowBytes, tid, v[k]);
  }

  QR_DEVICE_INLINE static float Accumulate(float acc, float x) { return platform::AddRn(acc, x); }
};

template <bool kBf16, int kA>
using Int8Codec = IntCodec<GpuCodec::kInt8, kBf16, kA>;
template <bool kBf16, int kA>
using Int6Codec = IntCodec<GpuCodec::kInt6, kBf16, kA>;
template <bool kBf16, int kA>
using Int4Codec = IntCodec<GpuCodec::kInt4, kBf16, kA>;
template <bool kBf16, int kA>
using Int3Codec = IntCodec<GpuCodec::kInt3, kBf16, kA>;

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODECS_CUH_
