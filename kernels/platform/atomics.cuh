// System-scope acquire/release atomics, fences and a wall clock for device
// code, with one spelling on both vendors. Every cross-GPU signal in the
// kernels goes through these (peer memory mapped over NVLink/XGMI, or host
// memory mapped into the GPU), so all of them use system scope.
#ifndef QR_KERNELS_PLATFORM_ATOMICS_CUH_
#define QR_KERNELS_PLATFORM_ATOMICS_CUH_

#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

#if QR_PLATFORM_CUDA

// Load that no later load or store of this thread may pass; pairs with
// AtomicStoreReleaseSystem on another GPU or the host.
QR_DEVICE_INLINE uint32_t AtomicLoadAcquireSystem(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Load with no ordering, always from the coherence point (never a stale L1
// line): for polling words whose writer orders nothing we read afterwards.
QR_DEVICE_INLINE uint32_t AtomicLoadRelaxedSystem(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Store after every earlier load/store this thread observed (cumulative:
// covers a block's stores that a preceding __syncthreads() ordered before it).
QR_DEVICE_INLINE void AtomicStoreReleaseSystem(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

QR_DEVICE_INLINE void AtomicStoreRelaxedSystem(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Sets *p to v if it still holds `expected`; returns the old value.
QR_DEVICE_INLINE uint32_t AtomicCasSystem(uint32_t* p, uint32_t expected, uint32_t v) {
  return atomicCAS_system(p, expected, v);
}

QR_DEVICE_INLINE void FenceSystem() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

// A short pause between polls of a location a peer writes, so that the
// pollers do not crowd the peer's stores to that line out of the L2.
QR_DEVICE_INLINE void PollPause() { __nanosleep(64); }

// Nanoseconds of a clock shared by all multiprocessors of the device.
QR_DEVICE_INLINE uint64_t WallClock() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

#else  // AMD

QR_DEVICE_INLINE uint32_t AtomicLoadAcquireSystem(const uint32_t* p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE uint32_t AtomicLoadRelaxedSystem(const uint32_t* p) {
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE void AtomicStoreReleaseSystem(uint32_t* p, uint32_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE void AtomicStoreRelaxedSystem(uint32_t* p, uint32_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

QR_DEVICE_INLINE uint32_t AtomicCasSystem(uint32_t* p, uint32_t expected, uint32_t v) {
  __hip_atomic_compare_exchange_strong(p, &expected, v, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED,
                                       __HIP_MEMORY_SCOPE_SYSTEM);
  return expected;
}

QR_DEVICE_INLINE void FenceSystem() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

QR_DEVICE_INLINE void PollPause() { __builtin_amdgcn_s_sleep(2); }

// Ticks of the constant-rate real-time counter (rate: WallClockRateKhz()).
QR_DEVICE_INLINE uint64_t WallClock() { return __builtin_amdgcn_s_memrealtime(); }

#endif

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_ATOMICS_CUH_
