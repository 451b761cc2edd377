// The codecs' units and wire layout, shared by the host reference
// (kernels/codec.h) and the GPU codecs (kernels/gpu/codecs.cuh): constexpr
// only, so both compilers read this one definition and the two cannot
// drift. docs/codecs.md is the normative description.
//
// Units (all fixed, independent of the message size):
//   block     32 consecutive values sharing one scale (integer codecs);
//   atom      8 consecutive values = 16 bytes of fp16/bf16, what one GPU thread
//             loads with one 16-byte access; a block is 4 atoms (4 threads);
//   atom row  256 atoms = 2048 values = 64 blocks, what a 256-thread GPU
//             block holds with one atom per thread. A shard is a sequence
//             of atom rows, laid out on the wire as one unit (below).
//
// Wire layout v2 (docs/codecs.md section 2): the unit is a shard of
// kA = ShardAtomRows(ws) = 8/ws atom rows (k = 0..kA-1 the row inside the
// shard, t = atom/thread 0..255, b = block 0..63 of the row, lb / hb =
// LowPlaneAtomBytes / HighPlaneAtomBytes, u_j = unsigned code of value j
// of the atom, pair m = values 2m, 2m+1, all words little-endian):
//   FP          the shard's raw 16-bit values in value order
//   low plane   [0, 256 lb kA)               atom (k, t) at t lb kA + k lb
//   high plane  [256 lb kA, 256 (lb+hb) kA)  atom (k, t) at 256 lb kA + t hb kA + k hb
//   scales      [256 (lb+hb) kA, kA R)       (k, b) at 256 (lb+hb) kA + (b kA + k) 2,
//                                            stored | kScaleWireFlag
// Bits inside an atom's plane words:
//   INT8  8 bytes, byte j = u_j
//   INT4  uint32: bits [4m, 4m+4) = u_2m, [16+4m, 20+4m) = u_2m+1
//   INT6  uint32 as INT4 with u_j & 15; uint16: bits [2m, 2m+2) = u_2m >> 4,
//         [8+2m, 10+2m) = u_2m+1 >> 4
//   INT3  uint16: bits [2m, 2m+2) = u_2m & 3, [8+2m, 10+2m) = u_2m+1 & 3;
//         uint8: bit m = u_2m >> 2, bit 4+m = u_2m+1 >> 2
// R = AtomRowWireBytes: FP 4096, INT8 2176, INT6 1664, INT4 1152, INT3 896;
// bytes per 32 values FP 64, INT8 34, INT6 26, INT4 18, INT3 14 (16, 8.5,
// 6.5, 4.5, 3.5 bits per value).
//
#ifndef QR_KERNELS_CODEC_LAYOUT_H_
#define QR_KERNELS_CODEC_LAYOUT_H_

#include <cstdint>

#include "common/limits.h"
#include "kernels/types.h"

namespace qr::kernels {

inline constexpr int kBlockElems = 32;
inline constexpr int kAtomElems = 8;
inline constexpr int kAtomBytes = 16;
inline constexpr int kAtomsPerBlock = kBlockElems / kAtomElems;  // 4 threads per scale
inline constexpr int kAtomRowAtoms = 256;
inline constexpr int kAtomRowElems = kAtomRowAtoms * kAtomElems;    // 2048
inline constexpr int kAtomRowBlocks = kAtomRowElems / kBlockElems;  // 64
inline constexpr int kScaleBytes = 2;
static_assert(kAtomBytes == kMessageAlignBytes, "a message is whole atoms");

// Q: the code of value 0 is Q and codes span [1, 2Q-1]. 0 for kFp.
constexpr int CodeBias(Codec codec) {
  return codec == Codec::kFp ? 0 : 1 << (CodecBits(codec) - 1);
}

// Blocks whose largest magnitude is below 2^-100 are sent as zero (only bf16
// can hold such values; it keeps d and 1/d normal fp32 numbers).
inline constexpr float kNegligibleAbsmax = 7.88860905e-31f;    // 2^-100
inline constexpr uint16_t kBf16NegligibleAbsmaxBits = 0x0D80;  // 2^-100 in bf16

// The fp32 constant c = 1 / (Q - 0.5) rounded to nearest, as bits (written
// out so that no compiler's constant folding can differ between host and
// device); 0 for kFp.
constexpr uint32_t ScaleFactorBits(Codec codec) {
  switch (codec) {
    case Codec::kInt8:
      return 0x3C008081u;  // 1/127.5
    case Codec::kInt6:
      return 0x3D020821u;  // 1/31.5
    case Codec::kInt4:
      return 0x3E088889u;  // 1/7.5
    case Codec::kInt3:
      return 0x3E924925u;  // 1/3.5
    case Codec::kFp:
      break;
  }
  return 0;
}

// Code planes: every code's low bits in one plane, the rest (INT6's top 2
// bits, INT3's top bit) in a second one after it.
constexpr int LowPlaneBits(Codec codec) {
  switch (codec) {
    case Codec::kInt6:
      return 4;
    case Codec::kInt3:
      return 2;
    default:
      return CodecBits(codec);
  }
}
constexpr bool HasHighPlane(Codec codec) { return LowPlaneBits(codec) != CodecBits(codec); }
// Bytes one atom (8 codes) occupies in each plane.
constexpr int LowPlaneAtomBytes(Codec codec) { return LowPlaneBits(codec) * kAtomElems / 8; }
constexpr int HighPlaneAtomBytes(Codec codec) {
  return (CodecBits(codec) - LowPlaneBits(codec)) * kAtomElems / 8;
}

// Layout v1's offsets inside one atom row (the high plane after 256 atoms'
// low-plane words, then 64 scale words), kept while kernels/gpu/codecs.cuh
// still reads them; layout v2 uses the Shard* offsets below. Where the
// second code plane (INT6 high bits, INT3 high bit) starts, 0 without one.
constexpr int64_t HighPlaneOffset(Codec codec) {
  return HasHighPlane(codec) ? int64_t{kAtomRowAtoms} * LowPlaneAtomBytes(codec) : 0;
}

// Wire bytes of one atom row (2048 values): 4096, 2176, 1664, 1152, 896.
constexpr int64_t AtomRowWireBytes(Codec codec) {
  const int64_t codes =
      int64_t{kAtomRowAtoms} * (LowPlaneAtomBytes(codec) + HighPlaneAtomBytes(codec));
  return codec == Codec::kFp ? codes : codes + int64_t{kAtomRowBlocks} * kScaleBytes;
}

// Where layout v1's scales start (integer codecs).
constexpr int64_t ScaleOffset(Codec codec) {
  return AtomRowWireBytes(codec) - kAtomRowBlocks * kScaleBytes;
}

static_assert(AtomRowWireBytes(Codec::kFp) == 4096 && AtomRowWireBytes(Codec::kInt8) == 2176 &&
                  AtomRowWireBytes(Codec::kInt6) == 1664 &&
                  AtomRowWireBytes(Codec::kInt4) == 1152 && AtomRowWireBytes(Codec::kInt3) == 896,
              "docs/codecs.md's row sizes");
static_assert(HighPlaneOffset(Codec::kInt6) == 1024 && HighPlaneOffset(Codec::kInt3) == 512 &&
                  ScaleOffset(Codec::kInt6) == 1536 && ScaleOffset(Codec::kInt3) == 768,
              "docs/codecs.md's plane offsets");

// --- Shard layout v2 (issue 18, docs/codecs.md section 2): a shard of
// ShardAtomRows(ws) atom rows holds, for the integer codecs, first every
// thread's low-plane words (thread t's kA atoms contiguous), then every
// thread's high-plane words, then the scale words (block b's kA rows
// contiguous), each scale stored with kScaleWireFlag set. ---

// Atom rows per two-shot tile (16384 values; kernels/geometry.h's kTileElems).
inline constexpr int kTileAtomRowsPerTile = 8;

// Set in every scale word on the wire (a reader masks it off): scale words
// are positive fp16/fp32-derived values, +0 or the canonical NaN 0x7E00 /
// 0x7FC0, so bit 15 is free, and a set bit makes every scale word non-zero.
inline constexpr uint16_t kScaleWireFlag = 0x8000;

// kA: the atom rows of one shard, 8 / world_size (ws 2: 4, 4: 2, 8: 1).
constexpr int ShardAtomRows(int world_size) { return kTileAtomRowsPerTile / world_size; }

// Bytes of a shard's low code plane: 256 * lb * kA.
constexpr int64_t ShardLowPlaneBytes(Codec c, int ws) {
  return int64_t{kAtomRowAtoms} * LowPlaneAtomBytes(c) * ShardAtomRows(ws);
}
// Where a shard's high code plane starts (INT6, INT3; for the others it is
// empty and starts where the scales do).
constexpr int64_t ShardHighPlaneOffset(Codec c, int ws) { return ShardLowPlaneBytes(c, ws); }
// Where a shard's scale words start: 256 * (lb + hb) * kA.
constexpr int64_t ShardScaleOffset(Codec c, int ws) {
  return int64_t{kAtomRowAtoms} * (LowPlaneAtomBytes(c) + HighPlaneAtomBytes(c)) *
         ShardAtomRows(ws);
}

// Whether a codec with this work dtype (the dtype the arithmetic runs in:
// fp16 for fp16 calls and bf16 calls cast to fp16) uses the packed-fp16
// arithmetic (kernels/packed_codec.h) instead of the fp32 one.
constexpr bool UsesPackedArithmetic(Codec c, DType work) {
  return (c == Codec::kInt3 || c == Codec::kInt4 || c == Codec::kInt6) && work == DType::kFloat16;
}

// Where each piece of a v2 shard lives (k = atom row inside the shard,
// 0..kA-1; t = atom/thread 0..255; b = block of the row 0..63):
// thread t's kA low-plane words are contiguous, then its kA high-plane
// words, and block b's kA scale words are contiguous.
constexpr int64_t ShardLowAtomOffset(Codec c, int ws, int k, int t) {
  return (int64_t{t} * ShardAtomRows(ws) + k) * LowPlaneAtomBytes(c);
}
constexpr int64_t ShardHighAtomOffset(Codec c, int ws, int k, int t) {
  return ShardHighPlaneOffset(c, ws) + (int64_t{t} * ShardAtomRows(ws) + k) * HighPlaneAtomBytes(c);
}
constexpr int64_t ShardScaleWordOffset(Codec c, int ws, int k, int b) {
  return ShardScaleOffset(c, ws) + (int64_t{b} * ShardAtomRows(ws) + k) * kScaleBytes;
}

// Bits inside one atom's plane word (8 fields of `field_bits` bits, one per
// value j = 0..7 of the atom): INT8 keeps value order (byte j); the narrower
// planes hold the even values in the low half and the odd ones in the high
// half, pair m = (2m, 2m+1) at the same place in each half, so that a GPU
// gets fp16x2 pair m's two codes with one shift and one mask.
constexpr int PlaneFieldShift(int field_bits, int j) {
  return field_bits == 8 ? 8 * j : (j & 1) * 4 * field_bits + (j >> 1) * field_bits;
}
// Code j's low bits (LowPlaneBits of them) in the low-plane word; its high
// bits (u_j >> LowPlaneBits) in the high-plane word.
constexpr int LowFieldShift(Codec c, int j) { return PlaneFieldShift(LowPlaneBits(c), j); }
constexpr int HighFieldShift(Codec c, int j) {
  return PlaneFieldShift(CodecBits(c) - LowPlaneBits(c), j);
}
static_assert(LowFieldShift(Codec::kInt8, 3) == 24 && LowFieldShift(Codec::kInt4, 1) == 16 &&
                  LowFieldShift(Codec::kInt4, 6) == 12 && LowFieldShift(Codec::kInt6, 7) == 28 &&
                  HighFieldShift(Codec::kInt6, 5) == 12 && LowFieldShift(Codec::kInt3, 3) == 10 &&
                  HighFieldShift(Codec::kInt3, 2) == 1 && HighFieldShift(Codec::kInt3, 7) == 7,
              "wire-v2 bits inside an atom's plane words");
static_assert(ShardScaleWordOffset(Codec::kInt4, 2, 3, 1) == 4096 + 14 &&
                  ShardLowAtomOffset(Codec::kInt4, 2, 2, 1) == 24 &&
                  ShardHighAtomOffset(Codec::kInt3, 2, 1, 2) == 2048 + 9,
              "wire-v2 offsets");

static_assert(ShardAtomRows(2) == 4 && ShardAtomRows(4) == 2 && ShardAtomRows(8) == 1,
              "kA = 8 / ws");
static_assert(ShardLowPlaneBytes(Codec::kInt8, 2) == 8192 &&
                  ShardLowPlaneBytes(Codec::kInt6, 2) == 4096 &&
                  ShardLowPlaneBytes(Codec::kInt4, 2) == 4096 &&
                  ShardLowPlaneBytes(Codec::kInt3, 2) == 2048 &&
                  ShardLowPlaneBytes(Codec::kInt8, 8) == 2048 &&
                  ShardLowPlaneBytes(Codec::kInt6, 4) == 2048,
              "wire-v2 low planes: 256 * lb * kA");
static_assert(ShardHighPlaneOffset(Codec::kInt6, 2) == 4096 &&
                  ShardHighPlaneOffset(Codec::kInt3, 2) == 2048,
              "wire-v2 high planes follow the low plane");
static_assert(ShardScaleOffset(Codec::kInt8, 2) == 8192 &&
                  ShardScaleOffset(Codec::kInt6, 2) == 6144 &&
                  ShardScaleOffset(Codec::kInt4, 2) == 4096 &&
                  ShardScaleOffset(Codec::kInt3, 2) == 3072 &&
                  ShardScaleOffset(Codec::kInt8, 8) == 2048 &&
                  ShardScaleOffset(Codec::kInt6, 8) == 1536 &&
                  ShardScaleOffset(Codec::kInt4, 4) == 2048,
              "wire-v2 scales: 256 * (lb + hb) * kA");
static_assert(ShardScaleOffset(Codec::kInt8, 2) + 4 * kAtomRowBlocks * kScaleBytes ==
                      4 * AtomRowWireBytes(Codec::kInt8) &&
                  ShardScaleOffset(Codec::kInt3, 2) + 4 * kAtomRowBlocks * kScaleBytes ==
                      4 * AtomRowWireBytes(Codec::kInt3),
              "a v2 shard is as large as kA v1 atom rows");

// Wire bytes of `num_elems` values; num_elems must be a multiple of 2048.
constexpr int64_t WireBytes(Codec codec, int64_t num_elems) {
  return num_elems / kAtomRowElems * AtomRowWireBytes(codec);
}

// Wire bytes per byte of 16-bit data: 1 (FP), 34/64, 26/64, 18/64, 14/64.
constexpr double WireRatio(Codec codec) {
  return static_cast<double>(AtomRowWireBytes(codec)) /
         static_cast<double>(AtomRowWireBytes(Codec::kFp));
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_CODEC_LAYOUT_H_
