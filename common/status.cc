#include "common/status.h"

#include <cstdio>

namespace qr {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kTimeout:
      return "TIMEOUT";
    case StatusCode::kPeerFailed:
      return "PEER_FAILED";
    case StatusCode::kUnsupported:
      return "UNSUPPORTED";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

std::optional<StatusCode> StatusCodeFromInt(uint32_t value) {
  if (value > kMaxStatusCode) return std::nullopt;
  return static_cast<StatusCode>(value);
}

Status::Status(StatusCode code, std::string message)
    : code_(code), message_(code == StatusCode::kOk ? std::string() : std::move(message)) {}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  // A context that already ends in the separator gets no second one
  // ("joining g: : why").
  while (!context.empty() && (context.back() == ' ' || context.back() == ':')) {
    context.remove_suffix(1);
  }
  if (context.empty()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status UnavailableError(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status TimeoutError(std::string m) { return Status(StatusCode::kTimeout, std::move(m)); }
Status PeerFailedError(std::string m) { return Status(StatusCode::kPeerFailed, std::move(m)); }
Status UnsupportedError(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

namespace internal {
void DieOnBadStatusOrAccess(const Status& status) {
  std::fprintf(stderr, "quickreduce: value() on a StatusOr holding %s\n",
               status.ToString().c_str());
  std::abort();
}
}  // namespace internal

}  // namespace qr
