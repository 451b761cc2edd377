#include "common/utf8.h"

#include <cstdint>
#include <cstdio>

namespace qr {
namespace {

uint8_t At(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

bool Continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

void AppendHexByte(std::string* out, uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02x", b);
  *out += buf;
}

// The code point of the well-formed sequence of length n at s[pos].
uint32_t Decode(std::string_view s, size_t pos, size_t n) {
  uint32_t b0 = At(s, pos);
  if (n == 1) return b0;
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (At(s, pos + i) & 0x3F);
  return cp;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  uint8_t b0 = At(s, pos);
  if (b0 < 0x80) return 1;
  size_t n;
  // The second byte's range excludes overlong forms (E0 80..9F, F0 80..8F),
  // surrogates (ED A0..BF) and code points above U+10FFFF (F4 90..).
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (s.size() - pos < n) return 0;
  uint8_t b1 = At(s, pos + 1);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (!Continuation(At(s, pos + i))) return 0;
  }
  return n;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string_view Utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) n = 1;
    if (i + n > max_bytes) break;
    i += n;
    end = i;
  }
  return s.substr(0, end);
}

std::string SanitizeUtf8(std::string_view s) {
  if (IsValidUtf8(s) && s.find('\0') == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0 || s[i] == '\0') {
      AppendHexByte(&out, At(s, i));
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string EscapeForTerminal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      AppendHexByte(&out, At(s, i));
      ++i;
      continue;
    }
    uint32_t cp = Decode(s, i, n);
    if (cp < 0x20 || cp == 0x7F) {
      AppendHexByte(&out, static_cast<uint8_t>(cp));
    } else if (cp == '\\') {
      out += "\\\\";
    } else if ((cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
               (cp >= 0x2066 && cp <= 0x2069)) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "\\u{%04x}", cp);
      out += buf;
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace qr
