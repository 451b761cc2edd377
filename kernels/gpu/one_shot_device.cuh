// The one-shot kernels' wire, start, gate and receive (kernels/gpu/one_shot.cu
// explains the protocol): the plain all-reduce, the fused all-reduce +
// residual + RMSNorm (one_shot_fused.cu) and the one-shot reduce-scatter and
// all-gather (one_shot_collectives.cu) move their atoms the same way, and
// every one of them that sums does it in ReceiveSum, so all give the bits of
// kernels/one_shot_reference.h.
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

// Polls *src until the atom arrived, starting from v, an earlier load of
// it. False when the wait gives up. The timing variants that skip waits
// take whatever is there (wrong results), so that one rank's kernel can be
// timed alone (tools/kernel_cost_options.h).
QR_DEVICE_INLINE bool Await(const char* src, Vec16& v, const KernelParams& p) {
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

// Source s's atom at byte `off` of its part of `mine`, this rank's one-shot
// region at the call's phase: the sources' parts follow each other.
template <int kWs, typename Byte>
QR_DEVICE_INLINE Byte* SourceAtom(Byte* mine, int s, size_t off) {
  return mine + s * static_cast<size_t>(OneShotMaxBytes(kWs)) + off;
}

// The first loads of every peer's atom of one slot, issued together before
// any is looked at: each is a round trip to L2 or over the link, and with
// the arrival check right after each load they ran one after another, ws -
// 1 round trips an atom (rank 0's one-shot all-reduce of 1 x 4096 fp16
// values alone at world size 8 on one H200: 3.34 us, 2.55 with the loads
// together; docs/performance.md). v[i] is rank i's atom for i below this
// rank, rank i + 1's from there on (PeerAtomOfRank).
template <int kWs>
struct PeerAtoms {
  Vec16 v[kWs - 1];
};

// Peer s's entry of a PeerAtoms (s != p.rank). With s a constant (an
// unrolled loop) the index is one of two constants, so the atoms stay in
// registers.
template <int kWs>
QR_DEVICE_INLINE Vec16 PeerAtomOfRank(const PeerAtoms<kWs>& a, int s, int rank) {
  return s < rank ? a.v[s < kWs - 1 ? s : kWs - 2] : a.v[s > 0 ? s - 1 : 0];
}

// `mine`: this rank's region at the call's phase; off: the atom's offset in
// each source's part of it.
template <int kWs>
QR_DEVICE_INLINE PeerAtoms<kWs> LoadPeerAtoms(const KernelParams& p, const char* mine, size_t off) {
  PeerAtoms<kWs> a;
#pragma unroll
  for (int i = 0; i < kWs - 1; ++i) {
    const int s = i < p.rank ? i : i + 1;
    a.v[i] = platform::LoadShared16(SourceAtom<kWs>(mine, s, off));
  }
  return a;
}

// A block's start in the kernels whose block b owns slot rows b, b + S, ...
// (the plain one-shot layout; one_shot.cu says why this is all the
// synchronization a call needs): thread 0 reads the sticky error word and
// the block's call count and stores count + 1 at once (nothing else in the
// grid touches the word); the count's parity picks the phase, returned as
// the byte offset of its half of the region. False: an earlier call gave
// up; return before touching a slot (a count advanced by a failed call is
// never used). Every thread calls it (a block barrier).
QR_DEVICE_INLINE bool BeginOneShotBlock(const KernelParams& p, size_t& phase_offset) {
  __shared__ uint32_t gave_up, call;
  if (threadIdx.x == 0) {
    gave_up = platform::AtomicLoadRelaxedSystem(p.dev_error);
    const uint32_t c = p.oneshot_counter[blockIdx.x];
    p.oneshot_counter[blockIdx.x] = c + 1;
    call = c;
  }
  __syncthreads();
  phase_offset = (call & 1u) * static_cast<size_t>(kOneShotRegionBytes);
  return gave_up == kGpuErrorNone;
}

// Grids larger than this gate their polling (OneShotGate). A single block
// (4 KiB of wire and below) polls at once: there the barrier costs more than
// the polling.
inline constexpr unsigned kOneShotGateBlocks = 1;

// The atom a peer pushes last for this block, of `atoms` wire atoms laid
// out as the plain kernel lays them: the highest one of the block's last
// row. Each thread of the peer's block pushes its atoms row by row, so this
// is among the last stores to land; block b's first atom lands with the
// first stores and says nothing of the rest. Most calls give a block one
// row, and then the last atom is the row's last thread's, stored by another
// warp at about the same time: the gate holds the block for most of the
// transfer, not all of it. Nothing depends on the order: the gate only
// keeps the other threads off the lines still being written, and every
// thread still polls each of its atoms before it reads it.
QR_DEVICE_INLINE size_t LastAtomOfBlock(size_t atoms, size_t stride) {
  const size_t row_atoms = kOneShotThreads;
  const size_t first_row = blockIdx.x;
  const size_t rows = (atoms + row_atoms - 1) / row_atoms;
  const size_t last_row =
      first_row + (rows - 1 - first_row) / (stride / row_atoms) * (stride / row_atoms);
  const size_t end = last_row * row_atoms + row_atoms;
  return (end < atoms ? end : atoms) - 1;
}

// While the peers' data is still on its way only thread 0 polls (every
// source's LastAtomOfBlock in `mine`, this rank's region at the call's
// phase); the others wait at the barrier. Thousands of threads polling the
// very lines the peers are writing slow the arrival down when one rank
// starts well before the other, as eager callers do (docs/performance.md,
// "Measurements behind the kernels' choices" and "Known problems"). False
// when the wait gave up. Every thread calls it; the answer is the same on
// all of them. Polls without clearing: the receive reads the atom again.
template <int kWs>
QR_DEVICE_INLINE bool OneShotGate(const KernelParams& p, const char* mine, size_t atoms,
                                  size_t stride) {
  if (gridDim.x <= kOneShotGateBlocks) return true;  // the same on every thread
  __shared__ uint32_t gate_ok;
  if (threadIdx.x == 0) {
    const size_t gate = LastAtomOfBlock(atoms, stride) * 16;
    const PeerAtoms<kWs> last = LoadPeerAtoms<kWs>(p, mine, gate);
    bool arrived = true;
#pragma unroll
    for (int s = 0; s < kWs; ++s) {
      Vec16 v = PeerAtomOfRank(last, s, p.rank);
      if (s != p.rank && arrived) arrived = Await(SourceAtom<kWs>(mine, s, gate), v, p);
    }
    gate_ok = arrived ? 1u : 0u;
  }
  __syncthreads();
  return gate_ok != 0;
}

// The one-shot reduce of one atom (kernels/one_shot_reference.h
// ReduceOneShot): this rank's own atom `own_wire` (its wire form, as a peer
// sees it: ToWire of the work-dtype bits) and every peer's wire atom at
// mine + s * OneShotMaxBytes(ws) + off (`mine`: this rank's region at the
// call's phase), each polled until it arrived and zeroed right after it
// was read, summed in fp32 in rank order 0..ws-1 and rounded once into
// *out. False when a wait gave up (the sticky error is set; *out is
// untouched).
//
// kGroup: the ranks whose atoms are loaded together, each group's loads
// issued before any of them is waited for (LoadPeerAtoms says why), at the
// cost of a group's atoms of registers. kWs (the default): every peer at
// once, one round trip, ws - 1 atoms; 1: each peer's load waits for the
// previous peer's atom, ws - 1 round trips; between: ranks [g kGroup, (g +
// 1) kGroup), ceil(ws / kGroup) round trips.
template <WorkFormat kElem, int kWs, int kGroup = kWs>
QR_DEVICE_INLINE bool ReceiveSumWire(const KernelParams& p, char* mine, size_t off,
                                     const Vec16& own_wire, Vec16& out) {
  constexpr bool kBf16 = Elem<kElem>::kMathBf16;
  static_assert(kGroup >= 1 && kGroup <= kWs && kWs % kGroup == 0, "whole groups of ranks");
  constexpr bool kAll = kGroup == kWs;
  const PeerAtoms<kWs> peers = kAll ? LoadPeerAtoms<kWs>(p, mine, off) : PeerAtoms<kWs>{};
  const Vec16 own = FromWire(own_wire);
  bool ok = true;
  float acc[8];
  Vec16 group[kGroup];
#pragma unroll
  for (int s = 0; s < kWs; ++s) {
    if (!ok) continue;  // not break: the loop must stay unrollable
    if (!kAll && kGroup > 1 && s % kGroup == 0) {
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        if (s + j != p.rank) group[j] = platform::LoadShared16(SourceAtom<kWs>(mine, s + j, off));
      }
    }
    Vec16 v = own;
    if (s != p.rank) {
      char* src = SourceAtom<kWs>(mine, s, off);
      v = kAll         ? PeerAtomOfRank(peers, s, p.rank)
          : kGroup > 1 ? group[s % kGroup]
                       : platform::LoadShared16(src);
      ok = Await(src, v, p);
      platform::StoreRemote16(src, Vec16{});
      // A timing variant that skips the waits (rank 0 timed alone) finds
      // empty slots, whose NaNs would send the conversions and the fused
      // kernel's division down their slow paths: it sums its own atom again.
      if (kVariantSkipsWaits && !Arrived(v)) v = own_wire;
      v = FromWire(v);
    }
    float f[8];
    Unpack<kBf16>(v, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = s == 0 ? f[e] : platform::AddRn(acc[e], f[e]);
  }
  if (ok) out = Elem<kElem>::Out(Pack<kBf16>(acc));
  return ok;
}

// The same from this rank's input bits `own_in`.
template <WorkFormat kElem, int kWs>
QR_DEVICE_INLINE bool ReceiveSum(const KernelParams& p, char* mine, size_t off, const Vec16& own_in,
                                 Vec16& out) {
  return ReceiveSumWire<kElem, kWs>(p, mine, off, ToWire(Elem<kElem>::In(own_in)), out);
}

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_ONE_SHOT_DEVICE_CUH_
