#include "common/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace qr {
namespace {

const std::string kEuro = "\xE2\x82\xAC";       // U+20AC, 3 bytes
const std::string kEmoji = "\xF0\x9F\x98\x80";  // U+1F600, 4 bytes

TEST(Utf8Test, ValidatesWellFormedSequencesOnly) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("gr\xC3\xBC\xC3\x9F " + kEuro + kEmoji));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8(kEuro.substr(0, 2)));  // truncated
}

TEST(Utf8Test, PrefixNeverCutsACharacter) {
  std::string s = "ab" + kEuro + kEmoji;  // 2 + 3 + 4 bytes
  EXPECT_EQ(Utf8Prefix(s, 100), s);
  EXPECT_EQ(Utf8Prefix(s, 9), s);
  for (size_t max : {2, 3, 4}) EXPECT_EQ(Utf8Prefix(s, max), "ab") << max;
  for (size_t max : {5, 6, 7, 8}) EXPECT_EQ(Utf8Prefix(s, max), "ab" + kEuro) << max;
  EXPECT_EQ(Utf8Prefix(s, 0), "");
  // Ill-formed bytes are single characters: a cut may fall after any of them.
  EXPECT_EQ(Utf8Prefix("\xFF\xFF\xFF", 2), "\xFF\xFF");
  // 128 euro signs cut at 255 bytes: 85 whole characters, valid.
  std::string many;
  for (int i = 0; i < 128; ++i) many += kEuro;
  std::string_view cut = Utf8Prefix(many, 255);
  EXPECT_EQ(cut.size(), 255u);
  EXPECT_TRUE(IsValidUtf8(cut));
  cut = Utf8Prefix(many, 254);
  EXPECT_EQ(cut.size(), 252u);
  EXPECT_TRUE(IsValidUtf8(cut));
}

TEST(Utf8Test, SanitizeEscapesIllFormedBytesOnly) {
  EXPECT_EQ(SanitizeUtf8("ok " + kEuro), "ok " + kEuro);
  EXPECT_EQ(SanitizeUtf8("a\xFF\xFF-x"), "a\\xff\\xff-x");
  EXPECT_EQ(SanitizeUtf8(kEuro.substr(0, 2) + "z"), "\\xe2\\x82z");
  EXPECT_EQ(SanitizeUtf8(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8("\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80")));
}

TEST(Utf8Test, TerminalEscapesControlsAndBidiOverrides) {
  EXPECT_EQ(EscapeForTerminal("fine " + kEuro), "fine " + kEuro);
  EXPECT_EQ(EscapeForTerminal("\x1B[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeForTerminal("x\nstatus: healthy"), "x\\x0astatus: healthy");
  EXPECT_EQ(EscapeForTerminal("\r\t\x7F"), "\\x0d\\x09\\x7f");
  EXPECT_EQ(EscapeForTerminal("\xC2\x9B"
                              "31m"),
            "\\u{009b}31m");  // C1 CSI
  EXPECT_EQ(EscapeForTerminal("\xE2\x80\xAE"
                              "txt"),
            "\\u{202e}txt");
  EXPECT_EQ(EscapeForTerminal("\xFF"), "\\xff");
  // A literal backslash cannot pass for an escape.
  EXPECT_EQ(EscapeForTerminal("\\x1b"), "\\\\x1b");
}

}  // namespace
}  // namespace qr
