// Byte counts as people read and type them: the one formatter behind every
// size in the tree's messages, tables and flags, and its inverse.
//
//   FormatBytes(64 << 20)                          "64 MiB"
//   FormatBytes(1536 << 10)                        "1536 KiB"  (exact)
//   FormatBytes(1536 << 10, ByteStyle::kRounded)   "1.5 MiB"
//   FormatBytes(4096, ByteStyle::kCompact)         "4K"        (ParseBytes reads it back)
//   QR_ASSIGN_OR_RETURN(uint64_t b, ParseBytes("16M"));
#ifndef QR_COMMON_BYTES_H_
#define QR_COMMON_BYTES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace qr {

enum class ByteStyle {
  kExact,    // the largest binary unit that divides: "16 B", "40 KiB", "64 MiB", "1 GiB"
  kRounded,  // the largest unit not above, one decimal: "512 B", "1.5 MiB" (status displays)
  kCompact,  // kExact's unit as one letter, no space: "100", "4K", "1M", "1G" (flags, labels)
};

// Units go up to TiB ("T"). Never fails.
std::string FormatBytes(uint64_t bytes, ByteStyle style = ByteStyle::kExact);

// "4096", "4K", "16k", "1M", "1G", "2T" -> bytes: digits with an optional
// binary-unit letter, either case. kInvalidArgument for anything else (empty,
// a sign, a decimal point, "MB", overflow), naming the text.
[[nodiscard]] StatusOr<uint64_t> ParseBytes(std::string_view text);

}  // namespace qr

#endif  // QR_COMMON_BYTES_H_
