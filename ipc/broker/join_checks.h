// The rules of admission to a group that exists: what a JOIN for it must
// agree on (world size, buffer geometry, a free rank, no shared GPU unless
// every GPU rank allows it) and the states it cannot join in. The registry
// (registry.h) asks before it takes a rank.
#ifndef QR_IPC_BROKER_JOIN_CHECKS_H_
#define QR_IPC_BROKER_JOIN_CHECKS_H_

#include "common/status.h"
#include "ipc/broker/registry.h"
#include "ipc/wire.h"

namespace qr::broker {

// Why `req` cannot join g, or OK: kAlreadyExists (adopted, READY, rank
// taken, a shared GPU not allowed), kPeerFailed (FAILED), kInvalidArgument
// (world size or buffer geometry differ).
[[nodiscard]] Status CheckJoinsExisting(const Group& g, const ipc::JoinRequest& req);

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_JOIN_CHECKS_H_
