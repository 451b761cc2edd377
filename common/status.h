// Status and StatusOr: the error currency of quickreduce.
//
// Fallible functions return Status or StatusOr<T>. The codes are exactly the
// C ABI's qr_status values (comm/quickreduce.h), so a Status crosses the C
// boundary, and the broker's wire replies, as (code, message) unchanged.
// Spelling follows absl::Status (ok(), code(), message(), value()).
//
//   StatusOr<int> ParsePort(std::string_view s);
//   QR_ASSIGN_OR_RETURN(int port, ParsePort(text));   // common/status_macros.h
#ifndef QR_COMMON_STATUS_H_
#define QR_COMMON_STATUS_H_

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace qr {

// Values are the C ABI's qr_status; never renumber.
enum class StatusCode : uint32_t {
  kOk = 0,
  kInvalidArgument = 1,
  kUnavailable = 2,  // broker unreachable, resource exhausted
  kTimeout = 3,      // a bounded wait ran out
  kPeerFailed = 4,   // a group member died or the group was aborted
  kUnsupported = 5,  // valid request this build or device cannot do
  kAlreadyExists = 6,
  kInternal = 7,  // a bug or an unexpected platform error
};
inline constexpr uint32_t kMaxStatusCode = 7;

// "OK", "INVALID_ARGUMENT", ... (the C ABI's qr_status_name minus "QR_").
const char* StatusCodeName(StatusCode code);
// The code for a raw value, or nullopt when it is not one (wire input).
std::optional<StatusCode> StatusCodeFromInt(uint32_t value);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;
  // Prepends "context: " to the message ("joining group g" gives "joining
  // group g: why"); a trailing ':' or ' ' in context is not doubled. OK stays OK.
  Status WithContext(std::string_view context) const;
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

inline Status OkStatus() { return Status(); }
Status InvalidArgumentError(std::string message);
Status UnavailableError(std::string message);
Status TimeoutError(std::string message);
Status PeerFailedError(std::string message);
Status UnsupportedError(std::string message);
Status AlreadyExistsError(std::string message);
Status InternalError(std::string message);

namespace internal {
[[noreturn]] void DieOnBadStatusOrAccess(const Status& status);
}  // namespace internal

// Holds either a T or a non-OK Status. Constructing one from an OK Status is a
// bug and becomes kInternal.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) { FixOk(); }        // NOLINT
  StatusOr(Status&& status) : status_(std::move(status)) { FixOk(); }  // NOLINT
  StatusOr(const T& value) : value_(value) {}                          // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}                    // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, StatusOr>>>
  StatusOr(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  const T& value() const& {
    Check();
    return *value_;
  }
  T& value() & {
    Check();
    return *value_;
  }
  T&& value() && {
    Check();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void FixOk() {
    // (void): nvcc takes the Status& that operator= returns for a discarded Status.
    if (status_.ok()) (void)(status_ = InternalError("StatusOr built from an OK Status"));
  }
  void Check() const {
    if (!value_.has_value()) internal::DieOnBadStatusOrAccess(status_);
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace qr

#endif  // QR_COMMON_STATUS_H_
