// The C ABI (comm/quickreduce.h) over qr::Communicator. Every entry point
// turns a Status into its qr_status and records the message as this thread's
// qr_last_error(); nothing here may throw or abort on caller input.
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "comm/c_api_internal.h"
#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/quickreduce.h"
#include "common/status.h"

// qr_status crosses the boundary as StatusCode's value (common/status.h):
// the two enums must stay equal.
static_assert(static_cast<int>(qr::StatusCode::kOk) == QR_OK);
static_assert(static_cast<int>(qr::StatusCode::kInvalidArgument) == QR_INVALID_ARGUMENT);
static_assert(static_cast<int>(qr::StatusCode::kUnavailable) == QR_UNAVAILABLE);
static_assert(static_cast<int>(qr::StatusCode::kTimeout) == QR_TIMEOUT);
static_assert(static_cast<int>(qr::StatusCode::kPeerFailed) == QR_PEER_FAILED);
static_assert(static_cast<int>(qr::StatusCode::kUnsupported) == QR_UNSUPPORTED);
static_assert(static_cast<int>(qr::StatusCode::kAlreadyExists) == QR_ALREADY_EXISTS);
static_assert(static_cast<int>(qr::StatusCode::kInternal) == QR_INTERNAL);
static_assert(qr::kMaxStatusCode == QR_INTERNAL, "a StatusCode without a qr_status");

struct qr_comm {
  std::unique_ptr<qr::Communicator> impl;
};

namespace {

thread_local std::string last_error;

qr_status Record(const qr::Status& s) {
  if (s.ok()) {
    last_error.clear();
  } else {
    last_error = std::string(qr::StatusCodeName(s.code())) + ": " + s.message();
  }
  return static_cast<qr_status>(s.code());
}

bool ToDType(qr_dtype d, qr::DType* out) {
  switch (d) {
    case QR_FLOAT16:
      *out = qr::DType::kFloat16;
      return true;
    case QR_BFLOAT16:
      *out = qr::DType::kBFloat16;
      return true;
  }
  return false;
}

qr::Status BadDType(int d) {
  return qr::InvalidArgumentError("dtype " + std::to_string(d) +
                                  " is not QR_FLOAT16 (0) or QR_BFLOAT16 (1)");
}

qr::Status NullComm(const char* fn) {
  return qr::InvalidArgumentError(std::string(fn) + ": communicator is NULL");
}

}  // namespace

namespace qr::internal {

qr_status RecordCStatus(const Status& s) { return Record(s); }

const Communicator& CommunicatorOf(const qr_comm* c) { return *c->impl; }
Communicator& MutableCommunicatorOf(qr_comm* c) { return *c->impl; }

}  // namespace qr::internal

extern "C" {

qr_status qr_join(const qr_join_options* opts, qr_comm** out) {
  if (out == nullptr) return Record(qr::InvalidArgumentError("qr_join: out is NULL"));
  *out = nullptr;
  if (opts == nullptr) return Record(qr::InvalidArgumentError("qr_join: opts is NULL"));
  if (opts->group == nullptr) {
    return Record(qr::InvalidArgumentError("qr_join: opts->group is NULL"));
  }
  qr::JoinOptions o;
  if (opts->broker_socket != nullptr) o.broker_socket = opts->broker_socket;
  o.group = opts->group;
  o.rank = opts->rank;
  o.world_size = opts->world_size;
  o.device = opts->device;
  o.timeout_ms = opts->timeout_ms;
  qr::StatusOr<std::unique_ptr<qr::Communicator>> c = qr::Communicator::Join(o);
  if (!c.ok()) return Record(c.status());
  qr_comm* handle = new (std::nothrow) qr_comm;
  if (handle == nullptr) return Record(qr::UnavailableError("qr_join: out of memory"));
  handle->impl = std::move(c).value();
  *out = handle;
  return Record(qr::OkStatus());
}

int qr_should_all_reduce(const qr_comm* c, size_t bytes, qr_dtype dtype) {
  qr::DType d;
  if (c == nullptr || !ToDType(dtype, &d)) return 0;
  return c->impl->ShouldAllReduce(bytes, d) ? 1 : 0;
}

qr_status qr_all_reduce(qr_comm* c, const void* in, void* out, size_t count, qr_dtype dtype,
                        void* stream) {
  if (c == nullptr) return Record(NullComm("qr_all_reduce"));
  qr::DType d;
  if (!ToDType(dtype, &d)) return Record(BadDType(dtype));
  return Record(c->impl->AllReduce(in, out, count, d, stream));
}

qr_status qr_all_reduce_ex(qr_comm* c, const void* in, void* out, size_t count, qr_dtype dtype,
                           qr_regime regime, int cast_bf16_to_fp16, void* stream) {
  if (c == nullptr) return Record(NullComm("qr_all_reduce_ex"));
  qr::DType d;
  if (!ToDType(dtype, &d)) return Record(BadDType(dtype));
  const int r = static_cast<int>(regime);
  if (!qr::IsValidRegime(r)) {
    return Record(
        qr::InvalidArgumentError("regime " + std::to_string(r) + " is not a qr_regime (0..5)"));
  }
  return Record(c->impl->AllReduce(in, out, count, d, static_cast<qr::Regime>(r),
                                   cast_bf16_to_fp16 != 0, stream));
}

qr_status qr_check(qr_comm* c) {
  if (c == nullptr) return Record(NullComm("qr_check"));
  return Record(c->impl->Check());
}

qr_status qr_abort(qr_comm* c, const char* reason) {
  if (c == nullptr) return Record(NullComm("qr_abort"));
  return Record(c->impl->Abort(reason != nullptr ? reason : "qr_abort"));
}

qr_status qr_leave(qr_comm* c) {
  if (c == nullptr) return Record(qr::OkStatus());
  qr::Status s = c->impl->Leave();
  delete c;
  return Record(s);
}

const char* qr_last_error(void) { return last_error.c_str(); }

const char* qr_status_name(qr_status s) {
  switch (s) {
    case QR_OK:
      return "QR_OK";
    case QR_INVALID_ARGUMENT:
      return "QR_INVALID_ARGUMENT";
    case QR_UNAVAILABLE:
      return "QR_UNAVAILABLE";
    case QR_TIMEOUT:
      return "QR_TIMEOUT";
    case QR_PEER_FAILED:
      return "QR_PEER_FAILED";
    case QR_UNSUPPORTED:
      return "QR_UNSUPPORTED";
    case QR_ALREADY_EXISTS:
      return "QR_ALREADY_EXISTS";
    case QR_INTERNAL:
      return "QR_INTERNAL";
  }
  return "QR_UNKNOWN";
}

int qr_comm_rank(const qr_comm* c) { return c == nullptr ? -1 : c->impl->rank(); }

int qr_comm_world_size(const qr_comm* c) { return c == nullptr ? -1 : c->impl->world_size(); }

}  // extern "C"
