#include "common/bytes.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace qr {
namespace {

constexpr int kMaxUnit = 4;  // TiB
constexpr const char* kIecUnits[kMaxUnit + 1] = {"B", "KiB", "MiB", "GiB", "TiB"};
constexpr const char* kLetters[kMaxUnit + 1] = {"", "K", "M", "G", "T"};

}  // namespace

std::string FormatBytes(uint64_t bytes, ByteStyle style) {
  if (style == ByteStyle::kRounded) {
    double v = static_cast<double>(bytes);
    int unit = 0;
    while (v >= 1024 && unit < kMaxUnit) {
      v /= 1024;
      ++unit;
    }
    if (unit == 0) return fmt::format("{} B", bytes);
    return fmt::format("{:.1f} {}", v, kIecUnits[unit]);
  }
  int unit = 0;
  while (unit < kMaxUnit && bytes != 0 && bytes % (uint64_t{1024} << (10 * unit)) == 0) ++unit;
  const uint64_t whole = bytes >> (10 * unit);
  if (style == ByteStyle::kCompact) return fmt::format("{}{}", whole, kLetters[unit]);
  return fmt::format("{} {}", whole, kIecUnits[unit]);
}

StatusOr<uint64_t> ParseBytes(std::string_view text) {
  std::string_view digits = text;
  int unit = 0;
  if (!text.empty()) {
    const char last = static_cast<char>(text.back() & ~0x20);  // upper case
    for (int u = 1; u <= kMaxUnit; ++u) {
      if (last == kLetters[u][0]) unit = u;
    }
  }
  if (unit != 0) digits.remove_suffix(1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgumentError(
        fmt::format("'{}' is not a size (digits with an optional K, M, G or T)", text));
  }
  const uint64_t max = std::numeric_limits<uint64_t>::max() >> (10 * unit);
  uint64_t n = 0;
  for (char c : digits) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (n > (max - d) / 10) return InvalidArgumentError(fmt::format("'{}' is too large", text));
    n = n * 10 + d;
  }
  return n << (10 * unit);
}

}  // namespace qr
