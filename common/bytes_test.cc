#include "common/bytes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t K = 1024;
constexpr uint64_t M = K * K;
constexpr uint64_t G = K * M;

TEST(FormatBytesTest, ExactUsesTheLargestUnitThatDivides) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(16), "16 B");
  EXPECT_EQ(FormatBytes(1000), "1000 B");
  EXPECT_EQ(FormatBytes(40 * K), "40 KiB");
  EXPECT_EQ(FormatBytes(48 * K + 16), "49168 B");
  EXPECT_EQ(FormatBytes(1536 * K), "1536 KiB");
  EXPECT_EQ(FormatBytes(64 * M), "64 MiB");
  EXPECT_EQ(FormatBytes(G), "1 GiB");
  EXPECT_EQ(FormatBytes(3 * K * G), "3 TiB");
  EXPECT_EQ(FormatBytes(1024 * K * G), "1024 TiB");
}

TEST(FormatBytesTest, RoundedKeepsOneDecimal) {
  EXPECT_EQ(FormatBytes(0, ByteStyle::kRounded), "0 B");
  EXPECT_EQ(FormatBytes(1023, ByteStyle::kRounded), "1023 B");
  EXPECT_EQ(FormatBytes(K, ByteStyle::kRounded), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536 * K, ByteStyle::kRounded), "1.5 MiB");
  EXPECT_EQ(FormatBytes(48 * K + 16, ByteStyle::kRounded), "48.0 KiB");
  EXPECT_EQ(FormatBytes(5 * K * G, ByteStyle::kRounded), "5.0 TiB");
  EXPECT_EQ(FormatBytes(UINT64_MAX, ByteStyle::kRounded), "16777216.0 TiB");
}

TEST(FormatBytesTest, CompactReadsBackThroughParseBytes) {
  EXPECT_EQ(FormatBytes(100, ByteStyle::kCompact), "100");
  EXPECT_EQ(FormatBytes(4 * K, ByteStyle::kCompact), "4K");
  EXPECT_EQ(FormatBytes(1536 * K, ByteStyle::kCompact), "1536K");
  EXPECT_EQ(FormatBytes(2 * M, ByteStyle::kCompact), "2M");
  EXPECT_EQ(FormatBytes(G, ByteStyle::kCompact), "1G");
  for (uint64_t b :
       {uint64_t{0}, uint64_t{16}, 4 * K, 1536 * K, 64 * M, G, 7 * K * G, UINT64_MAX}) {
    ASSERT_OK_AND_ASSIGN(uint64_t back, ParseBytes(FormatBytes(b, ByteStyle::kCompact)));
    EXPECT_EQ(back, b);
  }
}

TEST(ParseBytesTest, AcceptsDigitsWithAnOptionalUnitLetter) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"4096", 4096}, {"4K", 4 * K}, {"16k", 16 * K},   {"1M", M},
      {"3m", 3 * M},  {"1G", G},     {"2t", 2 * K * G}, {"0", 0}};
  for (const auto& [text, bytes] : cases) {
    ASSERT_OK_AND_ASSIGN(uint64_t b, ParseBytes(text));
    EXPECT_EQ(b, bytes) << text;
  }
}

TEST(ParseBytesTest, RejectsAnythingElseNamingTheText) {
  for (const char* bad : {"", "K", "-1", "+1", "1.5M", "1MB", "1 M", "M1", "0x10"}) {
    EXPECT_THAT(ParseBytes(bad), StatusIs(StatusCode::kInvalidArgument, HasSubstr("is not a size")))
        << bad;
  }
  EXPECT_THAT(ParseBytes("12X"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'12X'")));
  EXPECT_THAT(ParseBytes("18446744073709551616"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("too large")));
  EXPECT_THAT(ParseBytes("16777216T"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("too large")));
  ASSERT_OK_AND_ASSIGN(uint64_t max, ParseBytes("16777215T"));
  EXPECT_EQ(max, 16777215 * K * G);
}

}  // namespace
}  // namespace qr
