// The C ABI's reduce-scatter and all-gather (comm/quickreduce.h) over
// Communicator::ReduceScatter / ::AllGather.
#include <string>

#include "comm/c_api_internal.h"
#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/quickreduce.h"

namespace {

using qr::internal::RecordCStatus;

// The C arguments as the C++ API takes them, or the argument error.
qr::Status Convert(const char* fn, const qr_comm* c, qr_dtype dtype, qr_regime regime, qr::DType* d,
                   qr::Regime* r) {
  if (c == nullptr) return qr::InvalidArgumentError(std::string(fn) + ": communicator is NULL");
  if (!qr::IsValidDType(static_cast<int>(dtype))) {
    return qr::InvalidArgumentError("dtype " + std::to_string(static_cast<int>(dtype)) +
                                    " is not QR_FLOAT16 (0) or QR_BFLOAT16 (1)");
  }
  if (!qr::IsValidRegime(static_cast<int>(regime))) {
    return qr::InvalidArgumentError("regime " + std::to_string(static_cast<int>(regime)) +
                                    " is not a qr_regime (0..5)");
  }
  *d = static_cast<qr::DType>(dtype);
  *r = static_cast<qr::Regime>(regime);
  return qr::OkStatus();
}

}  // namespace

extern "C" {

qr_status qr_reduce_scatter_ex(qr_comm* c, const void* in, void* out, size_t recvcount,
                               qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                               void* stream) {
  qr::DType d;
  qr::Regime r;
  qr::Status s = Convert("qr_reduce_scatter_ex", c, dtype, regime, &d, &r);
  if (!s.ok()) return RecordCStatus(s);
  return RecordCStatus(qr::internal::MutableCommunicatorOf(c).ReduceScatter(
      in, out, recvcount, d, r, cast_bf16_to_fp16 != 0, stream));
}

qr_status qr_all_gather_ex(qr_comm* c, const void* in, void* out, size_t sendcount, qr_dtype dtype,
                           qr_regime regime, int cast_bf16_to_fp16, void* stream) {
  qr::DType d;
  qr::Regime r;
  qr::Status s = Convert("qr_all_gather_ex", c, dtype, regime, &d, &r);
  if (!s.ok()) return RecordCStatus(s);
  return RecordCStatus(qr::internal::MutableCommunicatorOf(c).AllGather(
      in, out, sendcount, d, r, cast_bf16_to_fp16 != 0, stream));
}

}  // extern "C"
