// Block-quantization codecs (FP, INT8, INT6, INT4, INT3): the host reference
// encoder/decoder of one shard in wire layout v2, which the GPU kernels must
// match bit for bit. docs/codecs.md (sections 2, 3 and 9) is the normative
// description; this header is its API, in two layers:
//
//   arithmetic  QuantizeBlock / DecodeCode: one block of 32 values, its scale
//               word and codes, in the block's arithmetic:
//               - packed fp16 (kernels/packed_codec.h) where
//                 UsesPackedArithmetic(codec, work): INT3/INT4/INT6 with an
//                 fp16 work dtype;
//               - fp32 otherwise (INT8, and INT3/INT4/INT6 on bf16):
//                   a = the block's largest magnitude (the scale word);
//                   Q = 2^(bits-1); c = (float)(1 / (Q - 0.5)); d = a * c;
//                   e = 1.0f / d; k = clamp(rint(x * e), -(Q - 1), Q - 1);
//                   u = k + Q (never 0); decode x' = (float)(u - Q) * d,
//                 every operation one IEEE fp32 operation rounded to nearest
//                 even (no FMA contraction, no fast-math, denormals kept).
//   layout      PackBlock / UnpackBlock: where a block's codes and scale word
//               sit in a shard of ShardAtomRows(ws) atom rows
//               (kernels/codec_layout.h's Shard* offsets and field shifts);
//               scale words travel with kScaleWireFlag set.
//
// A shard's values are numbered as in the tile: value i of the shard is
// value j = i % 8 of atom t = (i / 8) % 256 of the shard's atom row
// k = i / 2048; its block is i / 32 ("shard block", row k's block
// b = (i / 32) % 64).
//
// All functions are pure, thread-safe, and take raw bits of the WORK dtype
// (fp16, or bf16 when not cast); see WorkDType() in kernels/types.h.
#ifndef QR_KERNELS_CODEC_H_
#define QR_KERNELS_CODEC_H_

#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/types.h"

namespace qr::kernels {

// The fp32 constant c = 1 / (Q - 0.5): ScaleFactorBits as a float.
float ScaleFactor(Codec codec);

// The fp32 arithmetic's scale word of a block of 32 work-dtype values: the
// largest magnitude's bits, the canonical NaN for a block holding inf/NaN,
// 0 for a bf16 block below 2^-100.
uint16_t BlockScaleBits(DType work, const uint16_t* values);

// --- Arithmetic (integer codecs) ---

// Quantizes one block of 32 work-dtype values into codes[0, 32) (each in
// [1, 2Q-1]) and returns its scale word, without kScaleWireFlag.
uint16_t QuantizeBlock(Codec codec, DType work, const uint16_t* values, uint8_t* codes);

// The two arithmetics themselves, whatever the format (QuantizeBlock and
// DecodeCode pick one; tests compare them):
//   fp32:   scale = BlockScaleBits(work, values), codes as above;
//   packed: packed::EncodeBlock / packed::Decode (fp16 work dtype only).
uint16_t QuantizeBlockFp32(Codec codec, DType work, const uint16_t* values, uint8_t* codes);
float DecodeCodeFp32(Codec codec, DType work, int code, uint16_t scale);

// The decoded value of `code` under scale word `scale` (flag masked off):
// fp32 arithmetic: the exact fp32 product (u - Q) * d, before any narrowing;
// packed: the fp16 value packed::Decode gives, widened (exact). NaN for a
// NaN scale word, +0 for code Q under scale 0.
float DecodeCode(Codec codec, DType work, int code, uint16_t scale);

// --- Layout v2 (integer codecs) ---

// Writes shard block `shard_block`'s 32 codes and its scale word (stored
// with kScaleWireFlag set) into the shard's wire bytes.
void PackBlock(Codec codec, int world_size, int shard_block, const uint8_t* codes, uint16_t scale,
               uint8_t* wire);

// Reads shard block `shard_block`'s 32 codes into codes[0, 32) and returns
// its scale word with kScaleWireFlag masked off.
uint16_t UnpackBlock(Codec codec, int world_size, const uint8_t* wire, int shard_block,
                     uint8_t* codes);

// --- One block, one shard, every codec (FP: the raw 16-bit values, 64 bytes
// per block in value order) ---

// Encodes 32 values as shard block `shard_block` of a shard at `wire`.
void EncodeShardBlock(Codec codec, DType work, int world_size, int shard_block,
                      const uint16_t* values, uint8_t* wire);
// Decodes shard block `shard_block` of `wire` into 32 fp32 values.
void DecodeShardBlock(Codec codec, DType work, int world_size, const uint8_t* wire, int shard_block,
                      float* values);

// ShardElems(world_size) values into ShardWireBytes(codec, world_size)
// bytes at `wire`, and back. Inputs and outputs must not overlap.
void EncodeShard(Codec codec, DType work, int world_size, const uint16_t* values, uint8_t* wire);
void DecodeShard(Codec codec, DType work, int world_size, const uint8_t* wire, float* values);

}  // namespace qr::kernels

#endif  // QR_KERNELS_CODEC_H_
