// What the integer codecs share (kernels/gpu/codecs.cuh): layout v2 of a
// shard as one thread's pieces, the block maximum, the fp32 magic constant.
#ifndef QR_KERNELS_GPU_INT_WIRE_CUH_
#define QR_KERNELS_GPU_INT_WIRE_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/geometry.h"
#include "kernels/gpu/code_planes.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

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

// The same pieces as relaxed system-scope accesses (kernels/platform/
// relaxed.cuh), for the data-flag path: a reader polls each piece with the
// width and address its writer stored it with, so that every 32-bit (or
// 16-bit) element is single-copy atomic between the two.
template <int kBytes>
QR_DEVICE_INLINE void StoreRelaxedPiece(char* p, const uint32_t* w) {
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16 || kBytes == 32);
  if constexpr (kBytes >= 16) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      platform::StoreRelaxedSys16(p + 16 * i,
                                  Vec16{{w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]}});
    }
  } else if constexpr (kBytes == 8) {
    platform::StoreRelaxedSys8(p, w[0], w[1]);
  } else if constexpr (kBytes == 4) {
    platform::StoreRelaxedSys4(p, w[0]);
  } else {
    platform::StoreRelaxedSys2(p, w[0]);
  }
}

template <int kBytes>
QR_DEVICE_INLINE void LoadRelaxedPiece(const char* p, uint32_t* w) {
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16 || kBytes == 32);
  if constexpr (kBytes >= 16) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const Vec16 v = platform::LoadRelaxedSys16(p + 16 * i);
#pragma unroll
      for (int j = 0; j < 4; ++j) w[4 * i + j] = v.w[j];
    }
  } else if constexpr (kBytes == 8) {
    platform::LoadRelaxedSys8(p, w[0], w[1]);
  } else if constexpr (kBytes == 4) {
    w[0] = platform::LoadRelaxedSys4(p);
  } else {
    w[0] = platform::LoadRelaxedSys2(p);
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

  // --- Data as its own flag (INT4, INT8; kernels/gpu/two_shot.h). A shard
  // in a data-flag slot is the same bytes as above, but every piece travels
  // as relaxed system-scope accesses, and the first lane of each 4-lane
  // block stores the block's whole scale piece (kA words, one access), so
  // that the 4 lanes that read it poll the very access that wrote it. ---
  static constexpr bool kDataIsFlag = kCodec == Codec::kInt4 || kCodec == Codec::kInt8;

  QR_DEVICE_INLINE static char* ScalePiece(char* shard, int tid) {
    return shard + kScaleOffset + (tid / kAtomsPerBlock) * kScalePiece;
  }
  QR_DEVICE_INLINE static const char* ScalePiece(const char* shard, int tid) {
    return shard + kScaleOffset + (tid / kAtomsPerBlock) * kScalePiece;
  }

  QR_DEVICE_INLINE static void StoreFlagged(const Words& w, char* dst, int tid) {
    static_assert(kDataIsFlag && kHighPiece == 0, "only codes that are never zero");
    StoreRelaxedPiece<kLowPiece>(dst + tid * kLowPiece, w.lo);
    if (tid % kAtomsPerBlock == 0) StoreRelaxedPiece<kScalePiece>(ScalePiece(dst, tid), w.scale);
  }

  // One poll of this lane's words of the shard at src (its code words and
  // its block's scale piece) into w: true when all of them have arrived. A
  // zero code word, or a scale half without the flag, is still the
  // receiver's clear (or the zeroed buffer); a non-zero one is the sender's
  // whole word, since each 32-bit (16-bit) element is single-copy atomic
  // and the only other value the location can hold is that zero.
  QR_DEVICE_INLINE static bool PollLoad(const char* src, int tid, Words& w) {
    static_assert(kDataIsFlag && kHighPiece == 0, "only codes that are never zero");
    LoadRelaxedPiece<kLowPiece>(src + tid * kLowPiece, w.lo);
    w.hi[0] = 0;
    LoadRelaxedPiece<kScalePiece>(ScalePiece(src, tid), w.scale);
    bool arrived = true;
#pragma unroll
    for (int i = 0; i < kLowWords; ++i) arrived = arrived && w.lo[i] != 0;
    if constexpr (kScalePiece >= 4) {
      constexpr uint32_t kBoth = uint32_t{kScaleWireFlag} * 0x00010001u;
#pragma unroll
      for (int i = 0; i < kScaleWords; ++i) arrived = arrived && (w.scale[i] & kBoth) == kBoth;
    } else {
      arrived = arrived && (w.scale[0] & kScaleWireFlag) != 0;
    }
    return arrived;
  }

  // Zeroes what this lane's PollLoad read of the shard at dst, as its
  // writer wrote it (the first lane of a block clears the scale piece).
  // The caller syncs the warp first: the block's 4 lanes share the scale
  // piece, and none may clear it before all have loaded it.
  QR_DEVICE_INLINE static void ClearRead(char* dst, int tid) {
    const uint32_t zero[kLowWords > kScaleWords ? kLowWords : kScaleWords] = {};
    StoreRelaxedPiece<kLowPiece>(dst + tid * kLowPiece, zero);
    if (tid % kAtomsPerBlock == 0) StoreRelaxedPiece<kScalePiece>(ScalePiece(dst, tid), zero);
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

// An input atom `in` (in kIn) in the work format, and the maximum of its
// block (collective, like BlockAbsmaxBits). With the bf16 cast the packed
// conversion is exact unless a half comes out inf or NaN, which lifts the
// block's maximum to kFp16Inf or above: a warp with such a block converts
// those blocks again, exactly, and takes their maxima again.
template <WorkFormat kIn>
QR_DEVICE_INLINE uint32_t InputBlock(const Vec16& in, Vec16& x) {
  if constexpr (kIn == WorkFormat::kBf16Cast) {
    x = Elem<kIn>::InFast(in);
    uint32_t m = BlockAbsmaxBits(x);
    if (platform::WarpAny(m >= kFp16Inf)) {
      if (m >= kFp16Inf) x = Elem<kIn>::InExact(in);
      m = BlockAbsmaxBits(x);
    }
    return m;
  } else {
    x = Elem<kIn>::In(in);
    return BlockAbsmaxBits(x);
  }
}

// Q + rint(v) for |v| < 2^22 is the low bits of v + (1.5 * 2^23 + Q) rounded
// to nearest even (docs/codecs.md, "Equivalent forms").
inline constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
inline constexpr uint32_t kMagicBits = 0x4B400000u;

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_INT_WIRE_CUH_
