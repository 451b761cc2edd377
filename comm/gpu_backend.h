// The GPU backend: the two-shot kernels (kernels/gpu/two_shot.h) over GPU IPC
// mappings, one process per GPU.
//
// At creation it allocates on `device` one receive buffer (flags and two data
// phases, sized by the device's multiprocessor count; a few tens of MiB),
// the per-block colours, and a host-mapped error word, and takes the buffer's
// 64-byte IPC handle, which the communicator publishes (kGpuIpcHandle).
// Connect() checks peer access to every other peer GPU visible in this
// process, opens every peer's handle and maps the group's abort page into the
// GPU, so every wait inside a kernel polls the abort word. Ranks share a GPU
// only where the broker admitted it (every rank set QR_ALLOW_SHARED_DEVICE,
// a testing mode for NVIDIA MPS): then every kernel's grid is capped by SharedGpuMaxBlocks for the
// busiest GPU of the group (the slots' PCI bus ids), so all blocks sharing a GPU are resident
// together. AllReduce() enqueues ONE kernel on the caller's stream (also inside stream capture). A
// kernel that gives up (abort word raised: a peer died; or a wait ran past QR_OP_TIMEOUT_MS)
// records why in the error word; Failure() reports it (kPeerFailed / kTimeout) without blocking;
// the communicator keeps it and raises the group's abort on a timeout so peers stop too. Connect()
// ends with a join barrier of host-driven copies (no kernel) into a few words past the kernels'
// layout. Later kernels of a failed backend return at once, so streams drain.
#ifndef QR_COMM_GPU_BACKEND_H_
#define QR_COMM_GPU_BACKEND_H_

#include <memory>

#include "comm/backend.h"
#include "common/status.h"

namespace qr {

// A backend for `rank` of a `world_size` group on GPU `device` (an ordinal of
// this process); every wait in its kernels gives up after `op_timeout_ms`
// (QR_OP_TIMEOUT_MS, comm/config.h); the join barrier at the end of
// Connect() waits for the slowest peer to map its buffers and gives up after
// `join_timeout_ms` (the join's timeout). Errors: kInvalidArgument (bad rank / world size /
// device), kUnavailable (no such GPU, no GPU runtime), kInternal (runtime errors). The destructor
// waits for this device's work (bounded by the kernels' own timeouts), then unmaps and frees
// everything.
[[nodiscard]] StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(int device, int rank,
                                                                  int world_size,
                                                                  int64_t op_timeout_ms,
                                                                  int64_t join_timeout_ms);

}  // namespace qr

#endif  // QR_COMM_GPU_BACKEND_H_
