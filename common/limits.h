// The limits every layer checks the same way: which world sizes exist, the
// 16-byte unit of every message and pointer, and the longest timeout any
// knob or wire field accepts. ipc/, kernels/ and comm/ (and the tools) ask
// these functions instead of spelling the rule again, so the broker, the
// client library and the kernels can never disagree about what is valid.
//
// constexpr-only apart from ValidateWorldSize, so that device code (nvcc,
// hip-clang) reads the same header as g++.
#ifndef QR_COMMON_LIMITS_H_
#define QR_COMMON_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace qr {

// Group sizes quick-reduce runs at: the two-shot kernels are instantiated for
// these, and a tile (16384 values) splits evenly into their shards.
inline constexpr int kSupportedWorldSizes[] = {2, 4, 8};
inline constexpr int kNumSupportedWorldSizes = 3;
// The largest of them: sizes every per-rank array (segment slots, flag rows,
// peer pointers).
inline constexpr int kMaxWorldSize = kSupportedWorldSizes[kNumSupportedWorldSizes - 1];

// The position of `world_size` in kSupportedWorldSizes (the row of the
// per-world-size tables), or -1 when it is not supported.
constexpr int WorldSizeIndex(int world_size) {
  for (int i = 0; i < kNumSupportedWorldSizes; ++i) {
    if (kSupportedWorldSizes[i] == world_size) return i;
  }
  return -1;
}
constexpr bool IsSupportedWorldSize(int world_size) { return WorldSizeIndex(world_size) >= 0; }

// kInvalidArgument ("world size must be 2, 4 or 8, got N") unless
// IsSupportedWorldSize.
[[nodiscard]] Status ValidateWorldSize(int world_size);

// Messages are whole multiples of this many bytes, and buffers start on such
// a boundary: the kernels move one 16-byte vector per access (a misaligned
// one faults the GPU), and the codecs' smallest unit, an atom of 8 values,
// is 16 bytes.
inline constexpr size_t kMessageAlignBytes = 16;
constexpr bool IsWholeMessageUnits(uint64_t bytes) { return bytes % kMessageAlignBytes == 0; }

// The longest timeout any setting or wire field accepts (24 h): the join
// timeout, QR_OP_TIMEOUT_MS and QR_JOIN_TIMEOUT_MS. Longer is a typo, not a
// wish, and 24 h in milliseconds still fits the wire's uint32.
inline constexpr int64_t kMaxTimeoutMs = int64_t{24} * 3600 * 1000;
static_assert(kMaxTimeoutMs <= UINT32_MAX, "the wire carries timeouts as uint32 ms");

}  // namespace qr

#endif  // QR_COMMON_LIMITS_H_
