// What the one-shot reduce-scatter and all-gather kernels
// (kernels/gpu/one_shot_collectives.cu) put into the one-shot receive
// region, and whether a call fits it. Pure integer functions, compiled by
// g++ (host tests) and the GPU compilers alike, so that a host test checks
// what the device does.
//
// Both kernels lay their wire atoms over a source's part of the region
// exactly as the plain one-shot all-reduce lays a message of the same bytes
// (wire atom a at byte a * 16, slot row a / kOneShotThreads, block and area
// row % OneShotStrideBlocks), so they keep its areas, call counts and
// safety argument (one_shot.cu) and mix with plain and fused one-shot calls
// in any order.
//
// Reduce-scatter: rank p stores chunk q of its input (q != p) into rank q's
// region, source p, in the one-shot all-reduce's wire form (NOT, 0xFFFF ->
// 0xFFFE: a NaN stays a NaN and a sum of NaNs is the canonical NaN either
// way, so the sum's bits are the reference's). One chunk's bytes per source.
//
// All-gather: rank p stores its whole input into every peer's region,
// source p. The values must arrive bit for bit (NaN payloads included), and
// a 16-bit value has no spare code to keep zero free for "not yet", so
// every value travels as a 32-bit word of two non-zero 16-bit lanes, one
// byte of the value in each (GatherWireOfValue): an input atom of 8 values
// is 2 wire atoms, half h of the input atom (its values 4h..4h+3) the wire
// atom 2a + h. Twice the chunk's bytes per source; at world size 2 and more
// that is at most the whole message, which is what a one-shot all-reduce of
// the message sends per source, so a call the policy sends one-shot fits.
#ifndef QR_KERNELS_GPU_ONE_SHOT_COLLECTIVE_WIRE_H_
#define QR_KERNELS_GPU_ONE_SHOT_COLLECTIVE_WIRE_H_

#include <cstdint>

#include "kernels/geometry.h"
#include "kernels/platform/host_device.h"
#include "kernels/types.h"

namespace qr::kernels {

// Bytes one source stores into a peer's one-shot region for a reduce-scatter
// or all-gather of `count` values per rank; 0 for any other collective.
QR_HOST_DEVICE constexpr int64_t OneShotCollectiveWireBytes(Collective collective, int64_t count) {
  return collective == Collective::kReduceScatter ? count * 2
         : collective == Collective::kAllGather   ? count * 4
                                                  : 0;
}

// Whether a reduce-scatter or all-gather of `count` (> 0) values per rank
// fits one source's part of the one-shot region at world size `world_size`.
QR_HOST_DEVICE constexpr bool OneShotCollectiveFits(Collective collective, int64_t count,
                                                    int world_size) {
  const int64_t bytes = OneShotCollectiveWireBytes(collective, count);
  return count > 0 && bytes > 0 && bytes <= OneShotMaxBytes(world_size);
}

// The all-gather's wire word of one 16-bit value: the low byte in the low
// lane, the high byte in the high lane, 0x01 above each, so neither lane is
// ever zero.
QR_HOST_DEVICE constexpr uint32_t GatherWireOfValue(uint32_t value) {
  return 0x01000100u | (value & 0xFFu) | ((value & 0xFF00u) << 8);
}

// The value a wire word carries (the inverse of GatherWireOfValue).
QR_HOST_DEVICE constexpr uint32_t GatherValueOfWire(uint32_t wire) {
  return (wire & 0xFFu) | ((wire >> 8) & 0xFF00u);
}

// Byte offset, within the all-gather's chunk, of the 8 bytes (4 values)
// that wire atom `wire_atom` carries.
QR_HOST_DEVICE constexpr int64_t GatherChunkByteOffset(int64_t wire_atom) {
  return wire_atom / 2 * 16 + wire_atom % 2 * 8;
}

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_ONE_SHOT_COLLECTIVE_WIRE_H_
