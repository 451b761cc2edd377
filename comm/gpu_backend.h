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
// a testing mode for NVIDIA MPS): then every kernel's grid, the join
// barrier's included, is capped by SharedGpuMaxBlocks for the busiest GPU of
// the group (the slots' PCI bus ids), so all blocks sharing a GPU are
// resident together. AllReduce() enqueues ONE kernel on the caller's stream (also
// inside stream capture). A kernel that gives up (abort word raised: a peer
// died; or a wait ran past QR_OP_TIMEOUT_MS) records why in the error word;
// Check() and the next AllReduce() report it (kPeerFailed / kTimeout, sticky)
// without blocking, and a timeout raises the group's abort so peers stop too.
// Later kernels of a failed backend return at once, so streams drain.
#ifndef QR_COMM_GPU_BACKEND_H_
#define QR_COMM_GPU_BACKEND_H_

#include <memory>

#include "comm/backend.h"
#include "common/status.h"

namespace qr {

// A backend for `rank` of a `world_size` group on GPU `device` (an ordinal of
// this process); every wait in its kernels gives up after `op_timeout_ms`
// (QR_OP_TIMEOUT_MS, comm/config.h), except those of the join barrier at the
// end of Connect(), which wait for the slowest peer to map its buffers and
// give up after `join_timeout_ms` (the join's timeout). Errors: kInvalidArgument (bad rank / world size / device),
// kUnavailable (no such GPU, no GPU runtime), kInternal (runtime errors).
// The destructor waits for this device's work (bounded by the kernels' own
// timeouts), then unmaps and frees everything.
[[nodiscard]] StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(int device, int rank,
                                                                  int world_size,
                                                                  int64_t op_timeout_ms,
                                                                  int64_t join_timeout_ms);

}  // namespace qr

#endif  // QR_COMM_GPU_BACKEND_H_
