// Propagation and invariant macros for Status / StatusOr (common/status.h).
//
//   QR_RETURN_IF_ERROR(DoThing());                  // returns the Status if not OK
//   QR_ASSIGN_OR_RETURN(UniqueFd fd, OpenIt(path)); // declares fd or returns
//   QR_CHECK(n > 0) << "n=" << n;                   // broken invariant: abort
#ifndef QR_COMMON_STATUS_MACROS_H_
#define QR_COMMON_STATUS_MACROS_H_

#include <sstream>
#include <utility>

#include "common/status.h"

#define QR_STATUS_CONCAT_INNER_(a, b) a##b
#define QR_STATUS_CONCAT_(a, b) QR_STATUS_CONCAT_INNER_(a, b)

#define QR_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::qr::Status qr_status_ = (expr);        \
    if (!qr_status_.ok()) return qr_status_; \
  } while (0)

#define QR_ASSIGN_OR_RETURN(lhs, expr) \
  QR_ASSIGN_OR_RETURN_IMPL_(QR_STATUS_CONCAT_(qr_statusor_, __LINE__), lhs, expr)

#define QR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

namespace qr::internal {

// Collects the message streamed after QR_CHECK and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  ~CheckFailure();  // aborts
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `QR_CHECK(c) << x;` be one expression with a void type.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace qr::internal

// Broken invariants are bugs, not Statuses: print and abort.
#define QR_CHECK(cond) \
  (cond) ? (void)0     \
         : ::qr::internal::Voidify() & ::qr::internal::CheckFailure(__FILE__, __LINE__, #cond)

#ifdef NDEBUG
#define QR_DCHECK(cond) \
  while (false) QR_CHECK(cond)
#else
#define QR_DCHECK(cond) QR_CHECK(cond)
#endif

#endif  // QR_COMMON_STATUS_MACROS_H_
