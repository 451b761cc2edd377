// Bit shuffles between the integer codecs' bit planes and words that hold
// one code per byte. The planes are kernels/codec.h's: code j of an atom
// (8 codes) at bits 4j of the INT4 word and of the INT6 low plane, 2j of the
// INT6 high plane (its bits 4-5) and of the INT3 low plane (bits 0-1), and
// bit j of the INT3 high plane (bit 2). The byte words split an atom by
// parity: `even` holds codes 0, 2, 4, 6 in bytes 0-3, `odd` codes 1, 3, 5, 7.
// A byte permutation then moves a code to or from a byte in one operation
// (kernels/gpu/codecs.cuh), where the planes need a shift and a mask per code.
//
// constexpr, so the device code and a host test (code_planes_test.cc) run the
// same functions.
#ifndef QR_KERNELS_GPU_CODE_PLANES_H_
#define QR_KERNELS_GPU_CODE_PLANES_H_

#include <cstdint>

#include "kernels/types.h"

namespace qr::kernels::gpu {

// Nibble k of x (bits 0-15) into byte k.
constexpr uint32_t NibblesToBytes(uint32_t x) {
  x = (x | (x << 8)) & 0x00FF00FFu;
  return (x | (x << 4)) & 0x0F0F0F0Fu;
}

// Byte k of x (each < 16) into nibble k; the inverse of NibblesToBytes.
constexpr uint32_t BytesToNibbles(uint32_t x) {
  x = (x | (x >> 4)) & 0x00FF00FFu;
  return (x | (x >> 8)) & 0x0000FFFFu;
}

// Bit 2k of x (bits 0-7) into bit 2 of byte k: the multiply's partial
// products shift bit 2k by 6k + 2; the other products land on bits no target
// uses, and their carries reach only odd bits.
constexpr uint32_t EvenBitsToByteBit2(uint32_t x) {
  return ((x & 0x55u) * 0x00104104u) & 0x04040404u;
}

// Bit 0 of byte k of x (x & 0x01010101) into bit 2k: the partial products
// move bit 8k to bit 18 + 2k; the others miss bits 18-24 and carry only into
// odd bits.
constexpr uint32_t ByteBit0ToEvenBits(uint32_t x) { return ((x * 0x00041041u) >> 18) & 0x55u; }

// An atom's planes (INT4: lo only; INT6: lo 32 bits, hi 16; INT3: lo 16, hi
// 8) from its codes as bytes.
struct CodePlanes {
  uint32_t lo = 0, hi = 0;
};

template <Codec kCodec>
constexpr CodePlanes CodeBytesToPlanes(uint32_t even, uint32_t odd) {
  static_assert(kCodec == Codec::kInt4 || kCodec == Codec::kInt6 || kCodec == Codec::kInt3);
  CodePlanes p;
  if constexpr (kCodec == Codec::kInt4) {
    p.lo = even | (odd << 4);
  } else if constexpr (kCodec == Codec::kInt6) {
    p.lo = (even & 0x0F0F0F0Fu) | ((odd & 0x0F0F0F0Fu) << 4);
    p.hi =
        BytesToNibbles((even >> 4) & 0x03030303u) | (BytesToNibbles((odd >> 4) & 0x03030303u) << 2);
  } else {
    p.lo = BytesToNibbles(even & 0x03030303u) | (BytesToNibbles(odd & 0x03030303u) << 2);
    p.hi = ByteBit0ToEvenBits((even >> 2) & 0x01010101u) |
           (ByteBit0ToEvenBits((odd >> 2) & 0x01010101u) << 1);
  }
  return p;
}

// The inverse: `even` and `odd` from an atom's planes (hi unused for INT4).
template <Codec kCodec>
constexpr void PlanesToCodeBytes(uint32_t lo, uint32_t hi, uint32_t& even, uint32_t& odd) {
  static_assert(kCodec == Codec::kInt4 || kCodec == Codec::kInt6 || kCodec == Codec::kInt3);
  if constexpr (kCodec == Codec::kInt4) {
    even = lo & 0x0F0F0F0Fu;
    odd = (lo >> 4) & 0x0F0F0F0Fu;
  } else if constexpr (kCodec == Codec::kInt6) {
    even = (lo & 0x0F0F0F0Fu) | (NibblesToBytes(hi & 0x3333u) << 4);
    odd = ((lo >> 4) & 0x0F0F0F0Fu) | (NibblesToBytes((hi >> 2) & 0x3333u) << 4);
  } else {
    even = NibblesToBytes(lo & 0x3333u) | EvenBitsToByteBit2(hi);
    odd = NibblesToBytes((lo >> 2) & 0x3333u) | EvenBitsToByteBit2(hi >> 1);
  }
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODE_PLANES_H_
