// Relaxed system-scope loads and stores of 16, 8, 4 and 2 bytes, for data
// that is its own flag (kernels/gpu/two_shot.cu's data-flag path): a peer
// stores words into our receive buffer while we poll the same words.
//
// Every access is "strong" in the memory-model sense (PTX: .relaxed.sys; HIP:
// __hip_atomic_* with __HIP_MEMORY_SCOPE_SYSTEM), so a poll that overlaps a
// peer's store is not a data race, and each 32-bit element (a 16-bit one for
// the 2-byte forms) is single-copy atomic: a load returns either the whole
// old word or the whole new one, never a mixture. Wider accesses are a set
// of such elements in no particular order (PTX vector accesses; on AMD one
// access per word), so a reader must check every element it needs. A reader
// and a writer of the same location must use the same width at the same
// address (mixed-size accesses are not single-copy atomic with each other).
// Nothing here orders anything: pair with FenceSystem / acquire loads
// (atomics.cuh) where an order is needed. Loads always go to the coherence
// point (never a stale L1 line). All pointers aligned to their width.
#ifndef QR_KERNELS_PLATFORM_RELAXED_CUH_
#define QR_KERNELS_PLATFORM_RELAXED_CUH_

#include <cstdint>

#include "kernels/platform/device_macros.h"
#include "kernels/platform/vec.cuh"

namespace qr::platform {

#if QR_PLATFORM_CUDA

QR_DEVICE_INLINE void StoreRelaxedSys16(void* p, const Vec16& v) {
  asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.w[0]),
               "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

QR_DEVICE_INLINE void StoreRelaxedSys8(void* p, uint32_t lo, uint32_t hi) {
  asm volatile("st.relaxed.sys.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(lo), "r"(hi)
               : "memory");
}

QR_DEVICE_INLINE void StoreRelaxedSys4(void* p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The low 16 bits of v.
QR_DEVICE_INLINE void StoreRelaxedSys2(void* p, uint32_t v) {
  const unsigned short h = static_cast<unsigned short>(v);
  asm volatile("st.relaxed.sys.global.u16 [%0], %1;" ::"l"(p), "h"(h) : "memory");
}

QR_DEVICE_INLINE Vec16 LoadRelaxedSys16(const void* p) {
  Vec16 v;
  asm volatile("ld.relaxed.sys.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p)
               : "memory");
  return v;
}

QR_DEVICE_INLINE void LoadRelaxedSys8(const void* p, uint32_t& lo, uint32_t& hi) {
  asm volatile("ld.relaxed.sys.global.v2.u32 {%0, %1}, [%2];"
               : "=r"(lo), "=r"(hi)
               : "l"(p)
               : "memory");
}

QR_DEVICE_INLINE uint32_t LoadRelaxedSys4(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Zero-extended.
QR_DEVICE_INLINE uint32_t LoadRelaxedSys2(const void* p) {
  unsigned short v;
  asm volatile("ld.relaxed.sys.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}

#else  // AMD: one atomic access per 32-bit (or 16-bit) element.

QR_DEVICE_INLINE void StoreRelaxedSys4(void* p, uint32_t v) {
  __hip_atomic_store(static_cast<uint32_t*>(p), v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE void StoreRelaxedSys16(void* p, const Vec16& v) {
  uint32_t* q = static_cast<uint32_t*>(p);
  for (int i = 0; i < 4; ++i) StoreRelaxedSys4(q + i, v.w[i]);
}

QR_DEVICE_INLINE void StoreRelaxedSys8(void* p, uint32_t lo, uint32_t hi) {
  uint32_t* q = static_cast<uint32_t*>(p);
  StoreRelaxedSys4(q, lo);
  StoreRelaxedSys4(q + 1, hi);
}

QR_DEVICE_INLINE void StoreRelaxedSys2(void* p, uint32_t v) {
  __hip_atomic_store(static_cast<uint16_t*>(p), static_cast<uint16_t>(v), __ATOMIC_RELAXED,
                     __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE uint32_t LoadRelaxedSys4(const void* p) {
  return __hip_atomic_load(static_cast<const uint32_t*>(p), __ATOMIC_RELAXED,
                           __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE Vec16 LoadRelaxedSys16(const void* p) {
  const uint32_t* q = static_cast<const uint32_t*>(p);
  return Vec16{
      {LoadRelaxedSys4(q), LoadRelaxedSys4(q + 1), LoadRelaxedSys4(q + 2), LoadRelaxedSys4(q + 3)}};
}

QR_DEVICE_INLINE void LoadRelaxedSys8(const void* p, uint32_t& lo, uint32_t& hi) {
  const uint32_t* q = static_cast<const uint32_t*>(p);
  lo = LoadRelaxedSys4(q);
  hi = LoadRelaxedSys4(q + 1);
}

QR_DEVICE_INLINE uint32_t LoadRelaxedSys2(const void* p) {
  return __hip_atomic_load(static_cast<const uint16_t*>(p), __ATOMIC_RELAXED,
                           __HIP_MEMORY_SCOPE_SYSTEM);
}

#endif

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_RELAXED_CUH_
