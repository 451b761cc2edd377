// Bulk asynchronous copies from a block's shared memory to global memory
// (local or peer: an IPC or peer-access mapping), done by the copy engine of
// the multiprocessor (Hopper's TMA) instead of the threads' own stores.
// NVIDIA sm_90 only (PTX ISA 8.0): kBulkCopyAvailable says whether this
// platform has them, and host code must not launch a kernel that calls them
// where it is false (their AMD bodies trap).
//
// The protocol, for a buffer `smem` that the block fills and copies out:
//   every thread: stores into smem; FenceSharedForBulkCopy();
//   __syncthreads();
//   one thread:   BulkCopySharedToGlobal(dst, smem, bytes); BulkCommitGroup();
//   that thread:  BulkWaitGroupRead<N>() before smem is written again, with
//                 N = the copies (groups) it may still have in flight;
//                 BulkWaitGroup<0>() before the block exits.
// Bulk groups belong to the thread that commits them: the thread that
// issues the copies must be the one that waits for them.
#ifndef QR_KERNELS_PLATFORM_BULK_COPY_CUH_
#define QR_KERNELS_PLATFORM_BULK_COPY_CUH_

#include <cstdint>

#include "kernels/platform/device_macros.h"

namespace qr::platform {

// Whether the functions below do anything (NVIDIA: this project builds for
// sm_90 only, which has them).
inline constexpr bool kBulkCopyAvailable = QR_PLATFORM_CUDA != 0;
// Both addresses of a copy must be aligned to this, and its size a multiple
// of it (PTX ISA, cp.async.bulk).
inline constexpr uint32_t kBulkCopyAlign = 16;

#if QR_PLATFORM_CUDA

// Makes this thread's earlier (generic) stores to shared memory visible to
// the copy engine (the async proxy) that a later BulkCopySharedToGlobal of
// this block reads them with; a __syncthreads() after it carries that to the
// issuing thread. Without it the copy may read stale shared memory.
QR_DEVICE_INLINE void FenceSharedForBulkCopy() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Starts copying `bytes` (a positive multiple of 16) from shared memory at
// `src_shared` (this block's, 16-byte aligned) to global memory at `dst`
// (16-byte aligned), as part of this thread's current bulk group. Returns at
// once; the copy runs in the background.
QR_DEVICE_INLINE void BulkCopySharedToGlobal(void* dst, const void* src_shared, uint32_t bytes) {
  const uint32_t src = static_cast<uint32_t>(__cvta_generic_to_shared(src_shared));
  const uint64_t dst_global = static_cast<uint64_t>(__cvta_generic_to_global(dst));
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst_global),
               "r"(src), "r"(bytes)
               : "memory");
}

// Closes this thread's current bulk group (the copies issued since the last
// commit): the unit the waits below count.
QR_DEVICE_INLINE void BulkCommitGroup() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most kPending of this thread's most recent bulk groups
// still read their shared source: the shared memory of every older group
// may be written again.
template <int kPending>
QR_DEVICE_INLINE void BulkWaitGroupRead() {
  static_assert(kPending >= 0 && kPending <= 63, "an immediate the PTX accepts");
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until at most kPending of this thread's most recent bulk groups are
// incomplete: every older group's writes to global memory are performed.
template <int kPending>
QR_DEVICE_INLINE void BulkWaitGroup() {
  static_assert(kPending >= 0 && kPending <= 63, "an immediate the PTX accepts");
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

#else  // AMD: no bulk copy engine reachable from HIP; kBulkCopyAvailable is false.

QR_DEVICE_INLINE void FenceSharedForBulkCopy() { __builtin_trap(); }
QR_DEVICE_INLINE void BulkCopySharedToGlobal(void*, const void*, uint32_t) { __builtin_trap(); }
QR_DEVICE_INLINE void BulkCommitGroup() { __builtin_trap(); }
template <int kPending>
QR_DEVICE_INLINE void BulkWaitGroupRead() {
  __builtin_trap();
}
template <int kPending>
QR_DEVICE_INLINE void BulkWaitGroup() {
  __builtin_trap();
}

#endif

}  // namespace qr::platform

#endif  // QR_KERNELS_PLATFORM_BULK_COPY_CUH_
