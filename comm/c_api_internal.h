// What the C ABI's translation units share (comm/c_api.cc holds the fixed
// contract, comm/c_api_extras.cc the introspection and reference additions):
// the qr_last_error bookkeeping and the communicator behind a handle.
#ifndef QR_COMM_C_API_INTERNAL_H_
#define QR_COMM_C_API_INTERNAL_H_

#include "comm/communicator.h"
#include "comm/quickreduce.h"
#include "common/status.h"

namespace qr::internal {

// Records `s` as this thread's qr_last_error() text and returns its qr_status.
qr_status RecordCStatus(const Status& s);

// The communicator a (non-NULL) handle owns.
const Communicator& CommunicatorOf(const qr_comm* c);
Communicator& MutableCommunicatorOf(qr_comm* c);

}  // namespace qr::internal

#endif  // QR_COMM_C_API_INTERNAL_H_
