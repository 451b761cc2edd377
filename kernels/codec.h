// Block-quantization codecs (FP, INT8, INT6, INT4, INT3): the wire layout and
// the host reference encoder/decoder that the GPU kernels must match bit for
// bit. docs/codecs.md is the normative description; this header is its API.
//
// Units (all fixed, independent of the message size):
//   block     32 consecutive values sharing one scale (integer codecs);
//   atom      8 consecutive values = 16 bytes of fp16/bf16, what one GPU thread
//             loads with one 16-byte access; a block is 4 atoms (4 threads);
//   atom row  256 atoms = 2048 values = 64 blocks, what a 256-thread GPU
//             block holds with one atom per thread. Wire data is laid out per
//             atom row; a span of values is a sequence of atom rows.
//
// Wire layout of one atom row (t = atom/thread 0..255, b = block 0..63,
// u_j = unsigned code of value j of the atom, j = 0..7, little-endian):
//   FP    [0,4096)    atom t's 8 raw 16-bit values at 16*t
//   INT8  [0,2048)    atom t at 8*t: byte j = u_j
//         [2048,2176) scale of block b at 2048 + 2*b
//   INT6  [0,1024)    atom t at 4*t: uint32, bits [4j,4j+4) = u_j & 15
//         [1024,1536) atom t at 1024 + 2*t: uint16, bits [2j,2j+2) = u_j >> 4
//         [1536,1664) scales
//   INT4  [0,1024)    atom t at 4*t: uint32, bits [4j,4j+4) = u_j
//         [1024,1152) scales
//   INT3  [0,512)     atom t at 2*t: uint16, bits [2j,2j+2) = u_j & 3
//         [512,768)   atom t at 512 + t: uint8, bit j = u_j >> 2
//         [768,896)   scales
// Bytes per 32 values: FP 64, INT8 34, INT6 26, INT4 18, INT3 14
// (16, 8.5, 6.5, 4.5, 3.5 bits per value).
//
// A scale is 16 bits: the raw bits of the block's largest magnitude `a`
// (a value of the work dtype, so exact), or 0 for a zero/negligible block, or
// the canonical NaN for a block holding inf/NaN. Scale arithmetic is fp32:
//   Q = 2^(bits-1); c = (float)(1 / (Q - 0.5)); d = a * c; e = 1.0f / d;
//   code k = clamp(rint(x * e), -(Q - 1), Q - 1); u = k + Q (so u is never 0);
//   decode x' = (float)(u - Q) * d.
// Every operation is a single IEEE fp32 operation rounded to nearest even
// (no FMA contraction, no fast-math reciprocal, denormals kept).
//
// All functions are pure, thread-safe, and take raw bits of the WORK dtype
// (fp16, or bf16 when not cast); see WorkDType() in kernels/types.h.
#ifndef QR_KERNELS_CODEC_H_
#define QR_KERNELS_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "kernels/types.h"

namespace qr::kernels {

inline constexpr int kBlockElems = 32;
inline constexpr int kAtomElems = 8;
inline constexpr int kAtomBytes = 16;
inline constexpr int kAtomsPerBlock = kBlockElems / kAtomElems;    // 4 threads per scale
inline constexpr int kAtomRowAtoms = 256;
inline constexpr int kAtomRowElems = kAtomRowAtoms * kAtomElems;   // 2048
inline constexpr int kAtomRowBlocks = kAtomRowElems / kBlockElems; // 64
inline constexpr int kScaleBytes = 2;

// Q: the code of value 0 is Q and codes span [1, 2Q-1]. 0 for kFp.
constexpr int CodeBias(Codec codec) {
  return codec == Codec::kFp ? 0 : 1 << (CodecBits(codec) - 1);
}

// Blocks whose largest magnitude is below 2^-100 are sent as zero (only bf16
// can hold such values; it keeps d and 1/d normal fp32 numbers).
inline constexpr float kNegligibleAbsmax = 7.88860905e-31f;  // 2^-100
inline constexpr uint16_t kBf16NegligibleAbsmaxBits = 0x0D80;  // 2^-100 in bf16

// Wire bytes of one atom row (2048 values): 4096, 2176, 1664, 1152, 896.
constexpr int64_t AtomRowWireBytes(Codec codec) {
  switch (codec) {
    case Codec::kFp: return 4096;
    case Codec::kInt8: return 2176;
    case Codec::kInt6: return 1664;
    case Codec::kInt4: return 1152;
    case Codec::kInt3: return 896;
  }
  return 0;
}

// Offsets inside an atom row (integer codecs): where the scales start, and
// where the second code plane (INT6 high bits, INT3 high bit) starts.
constexpr int64_t ScaleOffset(Codec codec) {
  return AtomRowWireBytes(codec) - kAtomRowBlocks * kScaleBytes;
}
constexpr int64_t HighPlaneOffset(Codec codec) {
  return codec == Codec::kInt6 ? 1024 : codec == Codec::kInt3 ? 512 : 0;
}

// Wire bytes of `num_elems` values; num_elems must be a multiple of 2048.
constexpr int64_t WireBytes(Codec codec, int64_t num_elems) {
  return num_elems / kAtomRowElems * AtomRowWireBytes(codec);
}

// The fp32 constant c = 1 / (Q - 0.5), rounded once to fp32.
float ScaleFactor(Codec codec);

// The scale word of a block of 32 work-dtype values (see file comment).
uint16_t BlockScaleBits(DType work, const uint16_t* values);

// Encodes `num_elems` values (a multiple of 2048) into
// WireBytes(codec, num_elems) bytes at `wire`. Inputs and output must not
// overlap.
void EncodeSpan(Codec codec, DType work, const uint16_t* values, int64_t num_elems,
                uint8_t* wire);

// Decodes WireBytes(codec, num_elems) bytes into `num_elems` fp32 values
// (exact decoded values, before any narrowing).
void DecodeSpan(Codec codec, DType work, const uint8_t* wire, int64_t num_elems, float* values);

// One atom row (2048 values).
void EncodeAtomRow(Codec codec, DType work, const uint16_t* values, uint8_t* wire);
void DecodeAtomRow(Codec codec, DType work, const uint8_t* wire, float* values);

}  // namespace qr::kernels

#endif  // QR_KERNELS_CODEC_H_
