// The two-shot's phases as device functions over one tile, for the flag
// family's kernels (two_shot.h): where a tile's values live in the caller's
// buffers (a tile view), the slot rows and flags of a colour, phase 1 (encode
// every shard, store it into its owner's slot; reduce the slots in rank
// order) and phase 2 (store the reduced shard into every peer's slot; decode
// every slot into the output). The caller raises and waits for the flags
// (two_shot_device.cuh SignalAll / WaitAll) and orders the phases
// (two_shot.cu says why the two rows per block make that order safe).
//
// Collective contract: every function is called by every thread of the
// block with the same arguments (the codecs' Encode is collective over the
// warp); thread t handles atom t of every atom row.
#ifndef QR_KERNELS_GPU_TWO_SHOT_PHASES_CUH_
#define QR_KERNELS_GPU_TWO_SHOT_PHASES_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/geometry.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/gpu/two_shot_device.cuh"

namespace qr::kernels::gpu {

inline constexpr size_t kAtomStride = kTwoShotThreads * 16;  // bytes between a thread's atoms

// Tile view of the all-reduce: the message's tile t is its bytes [t *
// kTileBytes, (t + 1) * kTileBytes), shard s of it the s-th 1/ws of those;
// p.bytes is the message's size. Offset() gives the byte offset of this
// thread's atom k of shard s of `tile`, and false for an atom past the end
// (sizes are whole atoms).
template <int kWs>
struct MessageTiles {
  static constexpr int kA = kTwoShotAtoms / kWs;  // atoms per thread per shard
  QR_DEVICE_INLINE static bool Offset(const KernelParams& p, int tile, int s, int k, size_t& off) {
    off = static_cast<size_t>(tile) * kTileBytes + threadIdx.x * 16 + (s * kA + k) * kAtomStride;
    return off < p.bytes;
  }
};

// This thread's atom k of shard s of `tile` of the input (view T); atoms past
// the end read as zero.
template <class T>
QR_DEVICE_INLINE Vec16 LoadInputAtom(const KernelParams& p, int tile, int s, int k) {
  size_t off;
  return T::Offset(p, tile, s, k, off) ? platform::LoadInput16(p.in + off) : Vec16{};
}

// Shard s of `tile` into the output (view T), decoded from `w`, atom by atom
// (atoms past the end are not written).
template <WorkFormat kElem, class C, class T>
QR_DEVICE_INLINE void StoreOutputShard(const KernelParams& p, int tile, int s,
                                       const typename C::Wire& w) {
  C::template DecodeOut<kElem>(w, [&](int k, const Vec16& v) {
    size_t off;
    if (T::Offset(p, tile, s, k, off)) platform::StoreOutput16(p.out + off, v);
  });
}

// This thread's input atoms of every shard of `tile`, for the codecs that
// prefetch (C::kPrefetchInput): atom s * kA + k is shard s's atom k.
template <int kWs, class T>
QR_DEVICE_INLINE void LoadInputTile(const KernelParams& p, int tile,
                                    Vec16 (&atoms)[kTwoShotAtoms]) {
  constexpr int kA = kTwoShotAtoms / kWs;
#pragma unroll
  for (int i = 0; i < kTwoShotAtoms; ++i) atoms[i] = LoadInputAtom<T>(p, tile, i / kA, i % kA);
}

// Slot rows: each block has two rows of flags and slots per phase, and a
// tile of colour c uses row c's parity (two_shot.cu).
QR_DEVICE_INLINE uint32_t SlotRow(uint32_t colour) { return blockIdx.x * 2 + (colour & 1u); }
QR_DEVICE_INLINE size_t SlotOffset(uint32_t colour) {
  return static_cast<size_t>(SlotRow(colour)) * kTileSlotBytes;
}
// My flags of `colour`'s row in the flag array at `offset` (flags1/flags2).
QR_DEVICE_INLINE const uint32_t* MyFlagRow(const KernelParams& p, size_t offset, uint32_t colour) {
  return reinterpret_cast<const uint32_t*>(p.buffers[p.rank] + offset) +
         SlotRow(colour) * kMaxWorldSize;
}

// Phase 1 out: shard r of `tile` (view T) goes to rank r, row slot (block,
// my rank) of `colour`; my own shard stays in `own`. `prefetched` holds the
// tile's input if C::kPrefetchInput (LoadInputTile). The caller raises the
// flags.
template <WorkFormat kElem, class C, int kWs, class T>
QR_DEVICE_INLINE void SendPhase1(const KernelParams& p, int tile,
                                 const Vec16 (&prefetched)[kTwoShotAtoms], uint32_t colour,
                                 typename C::Wire& own) {
  constexpr int kA = kTwoShotAtoms / kWs;
  using Wire = typename C::Wire;
  const int tid = threadIdx.x;
#pragma unroll
  for (int r = 0; r < kWs; ++r) {
    Vec16 shard[kA];
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      shard[k] = C::kPrefetchInput ? prefetched[r * kA + k] : LoadInputAtom<T>(p, tile, r, k);
    }
    const Wire w = C::template EncodeInput<kElem>(shard, tid);
    // Written unconditionally at r = 0 (exactly one r is my rank), so the
    // previous tile's `own` is dead here and takes no registers.
    if (r == 0 || r == p.rank) own = w;
    if (r != p.rank) {
      C::Store(w, p.buffers[r] + p.data1 + SlotOffset(colour) + p.rank * C::kShardWireBytes, tid);
    }
  }
}

// Phase 1 in, once every source's flag of `colour` is up: my shard reduced
// in rank order 0..ws-1 (mine from `own`, the others from my slots).
template <class C, int kWs>
QR_DEVICE_INLINE void ReducePhase1(const KernelParams& p, uint32_t colour,
                                   const typename C::Wire& own,
                                   Vec16 (&reduced)[kTwoShotAtoms / kWs]) {
  using Wire = typename C::Wire;
  const char* my_data1 = p.buffers[p.rank] + p.data1 + SlotOffset(colour);
  Wire src[kWs];
#pragma unroll
  for (int s = 0; s < kWs; ++s) {
    const Wire loaded = s == p.rank ? own : C::Load(my_data1 + s * C::kShardWireBytes, threadIdx.x);
    src[s] = loaded;
  }
  C::Reduce(src, reduced);
}

// Phase 2 out: `w` (my shard's wire, encoded once) goes to every other rank,
// row slot (block, my rank) of `colour`. The caller raises the flags.
template <class C, int kWs>
QR_DEVICE_INLINE void SendPhase2(const KernelParams& p, uint32_t colour,
                                 const typename C::Wire& w) {
#pragma unroll
  for (int r = 0; r < kWs; ++r) {
    if (r != p.rank) {
      C::Store(w, p.buffers[r] + p.data2 + SlotOffset(colour) + p.rank * C::kShardWireBytes,
               threadIdx.x);
    }
  }
}

// Phase 2 in, once every source's flag of `colour` is up: every other
// rank's shard of `tile` decoded into the output (view T). My own shard is
// the caller's (it decodes it from registers).
template <WorkFormat kElem, class C, int kWs, class T>
QR_DEVICE_INLINE void ReceivePhase2(const KernelParams& p, int tile, uint32_t colour) {
  const char* my_data2 = p.buffers[p.rank] + p.data2 + SlotOffset(colour);
#pragma unroll
  for (int s = 0; s < kWs; ++s) {
    if (s == p.rank) continue;
    StoreOutputShard<kElem, C, T>(p, tile, s,
                                  C::Load(my_data2 + s * C::kShardWireBytes, threadIdx.x));
  }
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_TWO_SHOT_PHASES_CUH_
