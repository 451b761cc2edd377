// UTF-8 helpers for text that crosses a trust boundary: names read from
// /dev/shm, reasons written into shared memory by any member, messages echoed
// back to a client. Everything that reaches JSON (which must be valid UTF-8)
// or a terminal goes through these.
//
//   CopyField(buf, n, Utf8Prefix(reason, n - 1));  // never cuts a character
//   doc["name"] = SanitizeUtf8(file_name);         // always valid UTF-8
//   out << EscapeForTerminal(reason);              // no escapes, no newlines
//
// All functions are pure and thread-safe.
#ifndef QR_COMMON_UTF8_H_
#define QR_COMMON_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace qr {

// Length of the well-formed UTF-8 sequence starting at s[pos] (1 to 4), or 0
// if the bytes there are not one (overlong forms, surrogates, code points
// above U+10FFFF and truncated sequences are not).
size_t Utf8SequenceLength(std::string_view s, size_t pos);

// True if s is entirely well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// The longest prefix of s of at most max_bytes that does not end inside a
// well-formed multi-byte sequence (ill-formed bytes count as one byte each).
std::string_view Utf8Prefix(std::string_view s, size_t max_bytes);

// s with every byte that is not part of a well-formed sequence, and every NUL
// (which would end a C string or a fixed field early), replaced by the text
// "\xNN" (its hex value), so the result is valid UTF-8 without NULs and still
// shows which bytes were there. Other valid input is returned unchanged.
std::string SanitizeUtf8(std::string_view s);

// SanitizeUtf8, then every character a terminal could act on written as an
// escape: C0 controls (newline and tab included) and DEL as "\xNN", C1
// controls and the bidirectional overrides (U+202A-U+202E, U+2066-U+2069) as
// "\u{NNNN}", and the backslash as "\\" so an escape cannot be faked. For
// one-line display of untrusted text.
std::string EscapeForTerminal(std::string_view s);

}  // namespace qr

#endif  // QR_COMMON_UTF8_H_
