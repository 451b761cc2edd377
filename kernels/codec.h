// Block-quantization codecs (FP, INT8, INT6, INT4, INT3): the wire layout and
// the host reference encoder/decoder that the GPU kernels must match bit for
// bit. docs/codecs.md is the normative description; this header is its API.
//
// Units and wire layout: kernels/codec_layout.h (shared with the GPU codecs).
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

#include "kernels/codec_layout.h"
#include "kernels/types.h"

namespace qr::kernels {

// The fp32 constant c = 1 / (Q - 0.5): ScaleFactorBits as a float.
float ScaleFactor(Codec codec);

// The scale word of a block of 32 work-dtype values (see file comment).
uint16_t BlockScaleBits(DType work, const uint16_t* values);

// Encodes `num_elems` values (a multiple of 2048) into
// WireBytes(codec, num_elems) bytes at `wire`. Inputs and output must not
// overlap.
void EncodeSpan(Codec codec, DType work, const uint16_t* values, int64_t num_elems, uint8_t* wire);

// Decodes WireBytes(codec, num_elems) bytes into `num_elems` fp32 values
// (exact decoded values, before any narrowing).
void DecodeSpan(Codec codec, DType work, const uint8_t* wire, int64_t num_elems, float* values);

// One atom row (2048 values).
void EncodeAtomRow(Codec codec, DType work, const uint16_t* values, uint8_t* wire);
void DecodeAtomRow(Codec codec, DType work, const uint8_t* wire, float* values);

}  // namespace qr::kernels

#endif  // QR_KERNELS_CODEC_H_
