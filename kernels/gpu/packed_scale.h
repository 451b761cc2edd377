// The packed codecs' per-block numbers (kernels/packed_codec.h) computed in
// fp32 by code that g++ and the GPU compilers both compile: the kernels call
// it, and packed_scale_test.cc checks it on the host against
// packed::EncodeMultiplier / ScaleWord for every finite positive fp16 block
// maximum and every packed codec.
//
// Why fp32 gives the definition's bits (a = the block maximum, K = Q - 1/2):
// - a is exact in fp32, and K / a is one correctly rounded fp32 division
//   (IEEE '/': g++ on the host; nvcc's default -prec-div=true and hip-clang's
//   default correctly rounded division on the device; no fast-math anywhere).
//   Every quotient here is a normal fp32 number (K / a lies in [2^-15, 2^29]).
// - Truncating RN24(K / a) to 11 significant bits gives t = trunc11(K / a),
//   or T, the next 11-bit number above K / a, exactly when the division
//   rounded up onto T (rounding is monotone and T is an fp32 number). The
//   product e * a has at most 22 significant bits, so fp32 computes it
//   exactly, and e * a >= K holds exactly when e = T, or when e = t = K / a
//   (K / a itself has 11 bits). Both cases take the next 11-bit number below,
//   which makes e the largest one strictly below K / a. Stepping the fp32
//   bits down by one 11-bit ulp also crosses binades correctly.
// - 2^s / e is one more correctly rounded division; rounding it to fp16 is
//   RN16(RN24(2^s / e)) = RN16(2^s / e) (docs/codecs.md section 9.2: the
//   double rounding of a quotient is innocuous).
// A table of a's significand would save the two divisions (~20 instructions
// per block and phase); the divisions keep the device code this one function.
#ifndef QR_KERNELS_GPU_PACKED_SCALE_H_
#define QR_KERNELS_GPU_PACKED_SCALE_H_

#include <cstdint>

#include "kernels/codec_layout.h"
#include "kernels/packed_codec.h"
#include "kernels/platform/host_device.h"
#include "kernels/types.h"

namespace qr::kernels::gpu {

QR_HOST_DEVICE inline uint32_t PackedFloatBits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof(u));
  return u;
}

QR_HOST_DEVICE inline float PackedBitsFloat(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
}

struct PackedScale {
  float multiplier;  // e: 11 significant bits, exact
  float quotient;    // RN24(2^s / e); the scale word d~ is its RN16
};

// For a block maximum `absmax_bits` (fp16 bits of a finite value > 0).
QR_HOST_DEVICE inline PackedScale PackedScaleOf(Codec codec, uint32_t absmax_bits) {
  // fp16 -> fp32, exact: normal values by moving the fields, subnormal ones
  // as an integer times 2^-24.
  const float a = absmax_bits >= 0x0400u ? PackedBitsFloat((absmax_bits << 13) + 0x38000000u)
                                         : static_cast<float>(absmax_bits) * 5.9604644775390625e-8f;
  const float k = static_cast<float>(CodeBias(codec)) - 0.5f;
  const float q = k / a;
  float e = PackedBitsFloat(PackedFloatBits(q) & 0xFFFFE000u);
  if (e * a >= k) e = PackedBitsFloat(PackedFloatBits(e) - 0x2000u);
  return PackedScale{e, static_cast<float>(1 << packed::ScaleShift(codec)) / e};
}

// e as fp16 bits, exact for a multiplier that is a normal fp16 number (every
// block maximum in packed::FastPathAbsmax).
QR_HOST_DEVICE inline uint32_t PackedMultiplierHalf(float multiplier) {
  return (PackedFloatBits(multiplier) >> 13) - (112u << 10);
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_PACKED_SCALE_H_
