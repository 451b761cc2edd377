// The one-shot kernels' wire and receive (kernels/gpu/one_shot.cu explains
// the protocol): the plain all-reduce and the fused all-reduce + residual +
// RMSNorm (one_shot_fused.cu) move their atoms the same way.
#ifndef QR_KERNELS_GPU_ONE_SHOT_DEVICE_CUH_
#define QR_KERNELS_GPU_ONE_SHOT_DEVICE_CUH_

#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

// All 8 lanes non-zero: every 16-bit value of the atom has landed (a torn
// 16-byte store shows zero lanes and is polled again).
QR_DEVICE_INLINE bool Arrived(const Vec16& v) {
  bool ok = true;
#pragma unroll
  for (int i = 0; i < 4; ++i) ok = ok && (v.w[i] & 0xFFFFu) != 0 && (v.w[i] >> 16) != 0;
  return ok;
}

// Input bits -> wire form: 0xFFFF becomes 0xFFFE (both NaN), then NOT.
QR_DEVICE_INLINE Vec16 ToWire(const Vec16& v) {
  Vec16 r;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t w = v.w[i];
    if ((w & 0xFFFFu) == 0xFFFFu) w ^= 0x1u;
    if ((w >> 16) == 0xFFFFu) w ^= 0x10000u;
    r.w[i] = ~w;
  }
  return r;
}

QR_DEVICE_INLINE Vec16 FromWire(const Vec16& v) {
  return Vec16{{~v.w[0], ~v.w[1], ~v.w[2], ~v.w[3]}};
}

// Polls flat out this many times before pausing between polls: an on-time
// peer's atom is about a microsecond (one NVLink hop) away, and a pause in
// that window only delays noticing it; longer waits pause as before.
inline constexpr uint32_t kOneShotSpinPolls = 32;

// Polls *src until the atom arrived. False when the wait gives up. The
// timing variants that skip waits take whatever is there (wrong results), so
// that one rank's kernel can be timed alone (tools/kernel_cost.h).
QR_DEVICE_INLINE bool Receive(const char* src, Vec16& v, const KernelParams& p) {
  v = platform::LoadShared16(src);
  if (kVariantSkipsWaits || Arrived(v)) return true;
  const uint64_t start = platform::WallClock();
  uint32_t spins = 0;
  for (;;) {
    v = platform::LoadShared16(src);
    if (Arrived(v)) return true;
    if ((++spins & 63u) == 0 && ShouldGiveUp(start, p)) return false;
    if (spins > kOneShotSpinPolls) platform::PollPause();
  }
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_ONE_SHOT_DEVICE_CUH_
