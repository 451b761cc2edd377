#include "common/env.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    ::unsetenv("QR_TEST_X");
    ::unsetenv("VLLM_TEST_X");
  }
};

TEST_F(EnvTest, PrimaryNameWinsOverAlias) {
  ::setenv("VLLM_TEST_X", "5", 1);
  auto v = LookupEnv({"QR_TEST_X", "VLLM_TEST_X"});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->name, "VLLM_TEST_X");
  ::setenv("QR_TEST_X", "6", 1);
  EXPECT_EQ(*EnvInt({"QR_TEST_X", "VLLM_TEST_X"}, 0, 0, 10), 6);
}

TEST_F(EnvTest, EmptyValueCountsAsUnset) {
  ::setenv("QR_TEST_X", "", 1);
  EXPECT_FALSE(LookupEnv({"QR_TEST_X"}).has_value());
  EXPECT_EQ(*EnvBool({"QR_TEST_X"}, true), true);
}

TEST_F(EnvTest, BoolSpellings) {
  for (const char* t : {"1", "true", "TRUE", "yes", "On", " true "}) {
    EXPECT_EQ(*ParseBool("X", t), true) << t;
  }
  for (const char* f : {"0", "false", "False", "no", "OFF"}) {
    EXPECT_EQ(*ParseBool("X", f), false) << f;
  }
  EXPECT_THAT(ParseBool("QR_CAST", "maybe"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("QR_CAST='maybe'"), HasSubstr("true/false"))));
}

TEST_F(EnvTest, IntRejectsGarbageAndRange) {
  EXPECT_EQ(*ParseInt("X", "42", 0, 100), 42);
  EXPECT_EQ(*ParseInt("X", "-3", -5, 5), -3);
  EXPECT_THAT(ParseInt("QR_N", "4x", 0, 100),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_N='4x' is not an integer")));
  EXPECT_THAT(ParseInt("QR_N", "101", 0, 100),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("[0, 100]")));
  EXPECT_THAT(ParseInt("QR_N", "99999999999999999999", 0, 100),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseInt("QR_N", "", 0, 100), StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(EnvTest, ErrorNamesTheAliasThatWasSet) {
  ::setenv("VLLM_TEST_X", "lots", 1);
  EXPECT_THAT(EnvInt({"QR_TEST_X", "VLLM_TEST_X"}, 1, 0, 10),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("VLLM_TEST_X")));
}

TEST_F(EnvTest, ChoiceIsCaseInsensitiveAndListsAllowed) {
  EXPECT_EQ(*ParseChoice("X", "int4", {"FP", "INT4"}), "INT4");
  EXPECT_THAT(ParseChoice("QR_Q", "INT5", {"FP", "INT4"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("allowed: FP, INT4")));
  ::setenv("QR_TEST_X", "fp", 1);
  EXPECT_EQ(*EnvChoice({"QR_TEST_X"}, "INT4", {"FP", "INT4"}), "FP");
}

TEST_F(EnvTest, OptionalIntIsEmptyWhenUnset) {
  auto v = EnvOptionalInt({"QR_TEST_X"}, 0, 10);
  ASSERT_OK(v.status());
  EXPECT_FALSE(v->has_value());
  ::setenv("QR_TEST_X", "3", 1);
  EXPECT_EQ(**EnvOptionalInt({"QR_TEST_X"}, 0, 10), 3);
  ::setenv("QR_TEST_X", "11", 1);
  EXPECT_THAT(EnvOptionalInt({"QR_TEST_X"}, 0, 10), StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(EnvTest, StringFallsBack) {
  EXPECT_EQ(EnvString({"QR_TEST_X"}, "d"), "d");
  ::setenv("QR_TEST_X", "/x", 1);
  EXPECT_EQ(EnvString({"QR_TEST_X"}, "d"), "/x");
}

}  // namespace
}  // namespace qr
