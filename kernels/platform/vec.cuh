// 16-byte vector loads and stores with the cache behaviour each kind of
// buffer needs. All pointers must be 16-byte aligned.
#ifndef QR_KERNELS_PLATFORM_VEC_CUH_
#define QR_KERNELS_PLATFORM_VEC_CUH_

#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

struct alignas(16) Vec16 {
  uint32_t w[4];
};

// Caller's input: ordinary cached load.
QR_DEVICE_INLINE Vec16 LoadInput16(const void* p) {
  const uint4 v = *static_cast<const uint4*>(p);
  return Vec16{{v.x, v.y, v.z, v.w}};
}

// Caller's output: ordinary store.
QR_DEVICE_INLINE void StoreOutput16(void* p, const Vec16& v) {
  *static_cast<uint4*>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
}

#if QR_PLATFORM_CUDA

// Receive buffer written by peers: bypass L1 (a slot is reused every tile,
// an L1 line from the previous tile would be stale).
QR_DEVICE_INLINE Vec16 LoadShared16(const void* p) {
  Vec16 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p)
               : "memory");
  return v;
}

// Store into a peer's receive buffer (through the IPC/peer mapping).
QR_DEVICE_INLINE void StoreRemote16(void* p, const Vec16& v) {
  asm volatile("st.global.cg.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

// Narrower stores into a peer's receive buffer (8, 4 and 2 bytes).
QR_DEVICE_INLINE void StoreRemote64(void* p, uint32_t lo, uint32_t hi) {
  asm volatile("st.global.cg.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(lo), "r"(hi) : "memory");
}

QR_DEVICE_INLINE void StoreRemote32(void* p, uint32_t v) {
  asm volatile("st.global.cg.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

QR_DEVICE_INLINE void StoreRemote16Bits(void* p, uint32_t v) {
  const unsigned short h = static_cast<unsigned short>(v);
  asm volatile("st.global.cg.u16 [%0], %1;" ::"l"(p), "h"(h) : "memory");
}

// Narrow loads from a receive buffer, same cache rule as LoadShared16.
QR_DEVICE_INLINE uint32_t LoadShared32(const void* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

QR_DEVICE_INLINE uint32_t LoadShared16Bits(const void* p) {
  unsigned short v;
  asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}

QR_DEVICE_INLINE uint32_t LoadShared8Bits(const void* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

QR_DEVICE_INLINE void LoadShared64(const void* p, uint32_t& lo, uint32_t& hi) {
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];" : "=r"(lo), "=r"(hi) : "l"(p) : "memory");
}

#else  // AMD: receive buffers are fine-grained; non-temporal accesses skip caches.

QR_DEVICE_INLINE Vec16 LoadShared16(const void* p) {
  const uint32_t* q = static_cast<const uint32_t*>(p);
  return Vec16{{__builtin_nontemporal_load(q), __builtin_nontemporal_load(q + 1),
                __builtin_nontemporal_load(q + 2), __builtin_nontemporal_load(q + 3)}};
}

QR_DEVICE_INLINE void StoreRemote16(void* p, const Vec16& v) {
  uint32_t* q = static_cast<uint32_t*>(p);
  __builtin_nontemporal_store(v.w[0], q);
  __builtin_nontemporal_store(v.w[1], q + 1);
  __builtin_nontemporal_store(v.w[2], q + 2);
  __builtin_nontemporal_store(v.w[3], q + 3);
}

QR_DEVICE_INLINE void StoreRemote64(void* p, uint32_t lo, uint32_t hi) {
  uint32_t* q = static_cast<uint32_t*>(p);
  __builtin_nontemporal_store(lo, q);
  __builtin_nontemporal_store(hi, q + 1);
}

QR_DEVICE_INLINE void StoreRemote32(void* p, uint32_t v) {
  __builtin_nontemporal_store(v, static_cast<uint32_t*>(p));
}

QR_DEVICE_INLINE void StoreRemote16Bits(void* p, uint32_t v) {
  __builtin_nontemporal_store(static_cast<uint16_t>(v), static_cast<uint16_t*>(p));
}

QR_DEVICE_INLINE uint32_t LoadShared32(const void* p) {
  return __builtin_nontemporal_load(static_cast<const uint32_t*>(p));
}

QR_DEVICE_INLINE uint32_t LoadShared16Bits(const void* p) {
  return __builtin_nontemporal_load(static_cast<const uint16_t*>(p));
}

QR_DEVICE_INLINE uint32_t LoadShared8Bits(const void* p) {
  return __builtin_nontemporal_load(static_cast<const uint8_t*>(p));
}

QR_DEVICE_INLINE void LoadShared64(const void* p, uint32_t& lo, uint32_t& hi) {
  const uint32_t* q = static_cast<const uint32_t*>(p);
  lo = __builtin_nontemporal_load(q);
  hi = __builtin_nontemporal_load(q + 1);
}

#endif

// Orders shared-memory accesses among the lanes of one warp/wavefront:
// what a lane wrote before is visible to the others after.
QR_DEVICE_INLINE void WarpSync() {
#if QR_PLATFORM_CUDA
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#endif
}

// Value of `v` in lane `src` of the same group of `width` lanes (all lanes
// of the group must call it).
QR_DEVICE_INLINE uint32_t ShuffleU32(uint32_t v, int src, int width) {
  return static_cast<uint32_t>(__shfl(static_cast<int>(v), src, width));
}

QR_DEVICE_INLINE uint32_t ShuffleXorU32(uint32_t v, int mask, int width) {
  return static_cast<uint32_t>(__shfl_xor(static_cast<int>(v), mask, width));
}

// Whether `pred` holds on every (WarpAll) / some (WarpAny) lane of the
// warp; every lane of the warp must call it (the kernels' blocks are whole
// warps and call it from uniform control flow).
QR_DEVICE_INLINE bool WarpAll(bool pred) {
#if QR_PLATFORM_CUDA
  return __all_sync(0xFFFFFFFFu, pred) != 0;
#else
  return __all(pred) != 0;
#endif
}

QR_DEVICE_INLINE bool WarpAny(bool pred) {
#if QR_PLATFORM_CUDA
  return __any_sync(0xFFFFFFFFu, pred) != 0;
#else
  return __any(pred) != 0;
#endif
}

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_VEC_CUH_
