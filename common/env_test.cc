#include "common/env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "common/env_vars.h"
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

// A declared variable of every type, read through its declaration.
constexpr EnvVar kTestInt = EnvIntVar("QR_TEST_X", "VLLM_TEST_X", 7, 1, 10, "`7`", "a number");
constexpr EnvVar kTestOptional = EnvIntVar("QR_TEST_X", "", kNoEnvFallback, 0, 10, "unset", "");
constexpr EnvVar kTestBool = EnvBoolVar("QR_TEST_X", "", 1, "`1`", "a flag");
constexpr EnvVar kTestComputedBool = EnvBoolVar("QR_TEST_X", "", kNoEnvFallback, "", "");
constexpr EnvVar kTestChoice = EnvChoiceVar("QR_TEST_X", "", "B", "A,B,C", "`B`", "A, B or C");

TEST_F(EnvTest, DeclaredVariablesFallBackToTheirDeclaredDefault) {
  EXPECT_EQ(*kTestInt.Int(), 7);
  EXPECT_FALSE(kTestOptional.OptionalInt()->has_value());
  EXPECT_TRUE(*kTestBool.Bool());
  EXPECT_FALSE(*kTestComputedBool.Bool(false));
  EXPECT_EQ(*kTestChoice.Choice(), "B");
  EXPECT_EQ(*kTestChoice.Choice("C"), "C");
  EXPECT_EQ(kTestInt.String(), "");
  EXPECT_FALSE(kTestInt.Lookup().has_value());
}

TEST_F(EnvTest, DeclaredVariablesParseWithTheirRangeAndAlias) {
  ::setenv("VLLM_TEST_X", "3", 1);
  EXPECT_EQ(*kTestInt.Int(), 3);
  ::setenv("VLLM_TEST_X", "11", 1);
  EXPECT_THAT(kTestInt.Int(), StatusIs(StatusCode::kInvalidArgument,
                                       AllOf(HasSubstr("VLLM_TEST_X=11"), HasSubstr("[1, 10]"))));
  ::setenv("QR_TEST_X", "c", 1);
  EXPECT_EQ(*kTestChoice.Choice(), "C");
  EXPECT_THAT(kTestBool.Bool(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_TEST_X='c'")));
  EXPECT_EQ(kTestInt.String(), "c");
  EXPECT_EQ(kTestChoice.ChoiceList(), (std::vector<std::string>{"A", "B", "C"}));
}

// The table itself: what every reader relies on.
TEST(EnvVarsTest, TableIsWellFormed) {
  std::set<std::string_view> names;
  for (const EnvVar* v : kEnvVars) {
    SCOPED_TRACE(std::string(v->name));
    EXPECT_EQ(v->name.substr(0, 3), "QR_");
    EXPECT_TRUE(names.insert(v->name).second) << "declared twice";
    if (!v->alias.empty()) {
      EXPECT_EQ(v->alias.substr(0, 5), "VLLM_");
    }
    EXPECT_FALSE(v->default_doc.empty());
    EXPECT_FALSE(v->doc.empty());
    switch (v->type) {
      case EnvType::kInt:
        EXPECT_LE(v->min, v->max);
        if (v->has_fallback) {
          EXPECT_GE(v->fallback, v->min);
          EXPECT_LE(v->fallback, v->max);
        }
        break;
      case EnvType::kBool:
        EXPECT_TRUE(v->fallback == 0 || v->fallback == 1);
        break;
      case EnvType::kChoice: {
        const std::vector<std::string> choices = v->ChoiceList();
        EXPECT_NE(std::find(choices.begin(), choices.end(), v->fallback_text), choices.end());
        // The README's text lists what the variable accepts.
        for (const std::string& c : choices) {
          EXPECT_NE(v->doc.find(c), std::string::npos) << c;
        }
        break;
      }
      case EnvType::kString:
        EXPECT_FALSE(v->has_fallback);
        break;
    }
  }
}

}  // namespace
}  // namespace qr
