#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/status_macros.h"
#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::HasSubstr;

TEST(StatusTest, CodesMatchTheCAbi) {
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kOk), 0u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kInvalidArgument), 1u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kUnavailable), 2u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kTimeout), 3u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kPeerFailed), 4u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kUnsupported), 5u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kAlreadyExists), 6u);
  EXPECT_EQ(static_cast<uint32_t>(StatusCode::kInternal), 7u);
}

TEST(StatusTest, DefaultIsOkAndDropsMessage) {
  EXPECT_TRUE(Status().ok());
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = TimeoutError("rank 1 missing");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.ToString(), "TIMEOUT: rank 1 missing");
  EXPECT_EQ(s.WithContext("join g").message(), "join g: rank 1 missing");
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
}

TEST(StatusTest, WithContextNeverDoublesTheSeparator) {
  const Status s = TimeoutError("rank 1 missing");
  EXPECT_EQ(s.WithContext("join g: ").message(), "join g: rank 1 missing");
  EXPECT_EQ(s.WithContext("join g:").message(), "join g: rank 1 missing");
  EXPECT_EQ(s.WithContext("a").WithContext("b: ").message(), "b: a: rank 1 missing");
  EXPECT_EQ(s.WithContext("").message(), "rank 1 missing");
}

TEST(StatusTest, CodeFromIntRejectsUnknownValues) {
  EXPECT_EQ(StatusCodeFromInt(4), StatusCode::kPeerFailed);
  EXPECT_EQ(StatusCodeFromInt(8), std::nullopt);
  EXPECT_EQ(StatusCodeFromInt(0xffffffffu), std::nullopt);
  for (uint32_t c = 0; c <= kMaxStatusCode; ++c) {
    EXPECT_STRNE(StatusCodeName(static_cast<StatusCode>(c)), "UNKNOWN");
  }
}

TEST(StatusOrTest, HoldsValueOrError) {
  StatusOr<std::string> v = std::string("x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "x");
  StatusOr<std::string> e = InvalidArgumentError("bad");
  EXPECT_THAT(e, StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad")));
}

TEST(StatusOrTest, OkStatusBecomesInternal) {
  StatusOr<int> v = OkStatus();
  EXPECT_THAT(v, StatusIs(StatusCode::kInternal));
}

TEST(StatusOrTest, MoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(3);
  std::unique_ptr<int> p = std::move(v).value();
  EXPECT_EQ(*p, 3);
}

TEST(StatusOrDeathTest, ValueOfErrorAborts) {
  StatusOr<int> e = UnavailableError("no broker");
  EXPECT_DEATH((void)e.value(), "no broker");
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  QR_ASSIGN_OR_RETURN(int h, Half(x));
  QR_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  QR_RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusMacrosTest, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(CheckEven(2));
  EXPECT_THAT(CheckEven(3), StatusIs(StatusCode::kInvalidArgument, "odd"));
}

TEST(StatusMacrosDeathTest, CheckAbortsWithMessage) {
  int n = 0;
  QR_CHECK(n == 0) << "never";
  EXPECT_DEATH(QR_CHECK(n == 1) << "n was " << n, "check failed: n == 1 n was 0");
}

}  // namespace
}  // namespace qr
