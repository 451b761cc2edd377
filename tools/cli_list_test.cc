#include "tools/cli_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/status_macros.h"
#include "tests/util/status_matchers.h"

namespace qr::tools {
namespace {

using ::qr::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

StatusOr<int> ParseDigit(const std::string& s) {
  if (s.size() == 1 && s[0] >= '0' && s[0] <= '9') return s[0] - '0';
  return InvalidArgumentError("'" + s + "' is not a digit");
}

struct Flags {
  std::vector<int> list = {7};
  int one = -1;
  bool on = false;
};

StatusOr<Flags> Parse(const std::vector<std::string>& args, bool* help) {
  CLI::App app{"test"};
  UseToolDefaults(app);
  Flags f;
  AddListOption<int>(app, "--list", f.list, ParseDigit, "digits");
  AddParsedOption<int>(app, "--one", f.one, ParseDigit, "a digit");
  app.add_flag("--on", f.on, "a switch");
  QR_RETURN_IF_ERROR(ParseCli(app, args, help));
  return f;
}

TEST(CliListTest, SplitKeepsEmptyItems) {
  EXPECT_THAT(SplitCommaList("a,b"), ElementsAre("a", "b"));
  EXPECT_THAT(SplitCommaList("a,,b,"), ElementsAre("a", "", "b", ""));
  EXPECT_THAT(SplitCommaList(""), ElementsAre(""));
}

TEST(CliListTest, ParsesListsItemsAndSwitchesInBothSpellings) {
  bool help = true;
  ASSERT_OK_AND_ASSIGN(Flags f, Parse({"--list", "3,1,3", "--one=4", "--on"}, &help));
  EXPECT_FALSE(help);
  EXPECT_THAT(f.list, ElementsAre(3, 1, 3));
  EXPECT_EQ(f.one, 4);
  EXPECT_TRUE(f.on);
  ASSERT_OK_AND_ASSIGN(Flags untouched, Parse({}, &help));
  EXPECT_THAT(untouched.list, ElementsAre(7));
  EXPECT_EQ(untouched.one, -1);
  ASSERT_OK_AND_ASSIGN(Flags last,
                       Parse({"--list=1", "--list=2,5", "--one", "1", "--one", "2"}, &help));
  EXPECT_THAT(last.list, ElementsAre(2, 5));
  EXPECT_EQ(last.one, 2);
}

TEST(CliListTest, BadValuesNameTheFlagAndTheItem) {
  bool help = false;
  EXPECT_THAT(Parse({"--list", "1,x"}, &help),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--list: 'x' is not a digit")));
  EXPECT_THAT(Parse({"--list", "1,"}, &help),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--list: '' is not a digit")));
  EXPECT_THAT(Parse({"--one", "12"}, &help),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--one: '12' is not a digit")));
  EXPECT_THAT(Parse({"--one"}, &help), StatusIs(StatusCode::kInvalidArgument, HasSubstr("--one")));
  EXPECT_THAT(Parse({"--on=1"}, &help), StatusIs(StatusCode::kInvalidArgument, HasSubstr("on")));
  EXPECT_THAT(Parse({"--bogus"}, &help),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--bogus")));
  EXPECT_THAT(Parse({"stray"}, &help), StatusIs(StatusCode::kInvalidArgument, HasSubstr("stray")));
}

TEST(CliListTest, IntegersAreDecimalAndInRange) {
  ASSERT_OK_AND_ASSIGN(int v, ParseIntIn("42", 0, 100));
  EXPECT_EQ(v, 42);
  ASSERT_OK_AND_ASSIGN(int lo, ParseIntIn("-3", -3, 3));
  EXPECT_EQ(lo, -3);
  for (const char* bad : {"", "x", "4x", "101", "-1", "1e2", "99999999999999999999"}) {
    EXPECT_THAT(ParseIntIn(bad, 0, 100),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("is not an integer in 0..100")))
        << bad;
  }
}

TEST(CliListTest, HelpIsReportedNotAnError) {
  bool help = false;
  ASSERT_OK_AND_ASSIGN(Flags f, Parse({"--help", "--list", "1"}, &help));
  EXPECT_TRUE(help);
}

}  // namespace
}  // namespace qr::tools
