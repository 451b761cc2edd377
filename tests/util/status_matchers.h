// gtest helpers for Status / StatusOr.
//
//   ASSERT_OK(DoThing());
//   ASSERT_OK_AND_ASSIGN(auto fd, Open(path));
//   EXPECT_THAT(Parse("x"), StatusIs(qr::StatusCode::kInvalidArgument, HasSubstr("QR_X")));
#ifndef QR_TESTS_UTIL_STATUS_MATCHERS_H_
#define QR_TESTS_UTIL_STATUS_MATCHERS_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/status.h"

namespace qr::testing {

inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const StatusOr<T>& s) {
  return s.status();
}

MATCHER_P(StatusIs, code, std::string("has code ") + ::qr::StatusCodeName(code)) {
  const ::qr::Status& s = ::qr::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher, std::string("has code ") + ::qr::StatusCodeName(code)) {
  const ::qr::Status& s = ::qr::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code && ::testing::Matches(message_matcher)(s.message());
}

}  // namespace qr::testing

#define QR_TEST_CONCAT_INNER_(a, b) a##b
#define QR_TEST_CONCAT_(a, b) QR_TEST_CONCAT_INNER_(a, b)

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    const ::qr::Status qr_test_status_ = ::qr::testing::GetStatus(expr); \
    ASSERT_TRUE(qr_test_status_.ok()) << qr_test_status_;                \
  } while (0)
#define EXPECT_OK(expr)                                                  \
  do {                                                                   \
    const ::qr::Status qr_test_status_ = ::qr::testing::GetStatus(expr); \
    EXPECT_TRUE(qr_test_status_.ok()) << qr_test_status_;                \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(QR_TEST_CONCAT_(qr_test_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  ASSERT_TRUE(tmp.ok()) << tmp.status();           \
  lhs = std::move(tmp).value()

#endif  // QR_TESTS_UTIL_STATUS_MATCHERS_H_
