// The bits inside one atom's plane words in wire layout v2 (docs/codecs.md
// section 2), between them and the codes as the packed arithmetic holds
// them: pair m = u_{2m} | u_{2m+1} << 16 (m = 0..3; the even value of an
// fp16x2 word in the low half, the odd one in the high half, as the values
// themselves sit in the input words). The layout was chosen for this: a GPU
// gets pair m back from the planes with one shift and one mask (plus an OR
// of the high plane's bits), and builds the planes with a shift and an OR
// per pair.
//   INT4  lo uint32: bits [4m, 4m+4) = u_{2m}, bits [16+4m, 20+4m) = u_{2m+1}
//   INT6  lo uint32 as INT4 with u & 15; hi uint16: bits [2m, 2m+2) = u_{2m} >> 4,
//         bits [8+2m, 10+2m) = u_{2m+1} >> 4
//   INT3  lo uint16: bits [2m, 2m+2) = u_{2m} & 3, bits [8+2m, 10+2m) = u_{2m+1} & 3;
//         hi uint8: bit m = u_{2m} >> 2, bit 4+m = u_{2m+1} >> 2
// (INT8 keeps one code per byte; kernels/gpu/codecs.cuh moves its bytes.)
//
// constexpr, so the device code and a host test (code_planes_test.cc) run the
// same functions.
#ifndef QR_KERNELS_GPU_CODE_PLANES_H_
#define QR_KERNELS_GPU_CODE_PLANES_H_

#include <cstdint>

#include "kernels/types.h"

namespace qr::kernels::gpu {

// An atom's planes (INT4: lo only; INT6: lo 32 bits, hi 16; INT3: lo 16, hi 8).
struct CodePlanes {
  uint32_t lo = 0, hi = 0;
};

// Bytes 0 and 2 of x into bytes 0 and 1 (the high plane words: the even
// codes' bits sit in byte 0 of the pairs' sum, the odd ones' in byte 2).
constexpr uint32_t Bytes02To01(uint32_t x) { return (x & 0xFFu) | ((x >> 8) & 0xFF00u); }
// The inverse: bytes 0 and 1 into bytes 0 and 2.
constexpr uint32_t Bytes01To02(uint32_t x) { return (x & 0xFFu) | ((x & 0xFF00u) << 8); }

template <Codec kCodec>
constexpr CodePlanes PairsToPlanes(const uint32_t (&pairs)[4]) {
  static_assert(kCodec == Codec::kInt4 || kCodec == Codec::kInt6 || kCodec == Codec::kInt3);
  CodePlanes p;
  if constexpr (kCodec == Codec::kInt4) {
    for (int m = 0; m < 4; ++m) p.lo |= pairs[m] << (4 * m);
  } else if constexpr (kCodec == Codec::kInt6) {
    uint32_t hi = 0;
    for (int m = 0; m < 4; ++m) {
      p.lo |= (pairs[m] & 0x000F000Fu) << (4 * m);
      hi |= ((pairs[m] >> 4) & 0x00030003u) << (2 * m);
    }
    p.hi = Bytes02To01(hi);
  } else {
    uint32_t lo = 0, hi = 0;
    for (int m = 0; m < 4; ++m) {
      lo |= (pairs[m] & 0x00030003u) << (2 * m);
      hi |= ((pairs[m] >> 2) & 0x00010001u) << m;
    }
    p.lo = Bytes02To01(lo);
    p.hi = (hi & 0xFu) | ((hi >> 12) & 0xF0u);
  }
  return p;
}

// The planes spread so that PairOf is one shift and mask per plane: INT6's
// and INT3's 16-bit words with their odd codes' byte moved to byte 2, INT3's
// high byte with its odd nibble moved to bits 16-19. Once per atom.
template <Codec kCodec>
constexpr CodePlanes SpreadPlanes(CodePlanes p) {
  static_assert(kCodec == Codec::kInt4 || kCodec == Codec::kInt6 || kCodec == Codec::kInt3);
  if constexpr (kCodec == Codec::kInt6) {
    p.hi = Bytes01To02(p.hi);
  } else if constexpr (kCodec == Codec::kInt3) {
    p.lo = Bytes01To02(p.lo);
    p.hi = (p.hi & 0xFu) | ((p.hi & 0xF0u) << 12);
  }
  return p;
}

// Pair m of an atom from its SpreadPlanes.
template <Codec kCodec>
constexpr uint32_t PairOf(const CodePlanes& spread, int m) {
  static_assert(kCodec == Codec::kInt4 || kCodec == Codec::kInt6 || kCodec == Codec::kInt3);
  if constexpr (kCodec == Codec::kInt4) {
    return (spread.lo >> (4 * m)) & 0x000F000Fu;
  } else if constexpr (kCodec == Codec::kInt6) {
    return ((spread.lo >> (4 * m)) & 0x000F000Fu) | (((spread.hi >> (2 * m)) & 0x00030003u) << 4);
  } else {
    return ((spread.lo >> (2 * m)) & 0x00030003u) | (((spread.hi >> m) & 0x00010001u) << 2);
  }
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODE_PLANES_H_
