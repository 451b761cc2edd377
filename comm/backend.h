// Backend: the data path of one communicator, behind a small interface.
//
// A Communicator (comm/communicator.h) owns exactly one Backend. The host
// backend (comm/host_backend.h) runs the two-shot reference over POSIX shared
// memory; the GPU backend (comm/gpu_backend.h) runs the kernels over IPC
// mappings. Life cycle, driven by the communicator:
//   1. created before JOIN: device_id() and buffer_bytes() go into the JOIN
//      request (the broker refuses a device twice or a geometry mismatch);
//   2. after JOIN, Allocate() creates this rank's shared buffers (named from
//      the group segment, so the broker and `qrctl gc` can sweep them), then
//      blob_kind()/blob() are published in this rank's slot;
//   3. after READY, Connect() maps every peer's buffers (members in rank order);
//   4. AllReduce() any number of times; Check() at any time;
//   5. destroyed before LEAVE: frees and unlinks whatever this rank created.
// Not thread-safe: the communicator serialises calls (the C ABI is
// thread-compatible, one communicator per thread).
#ifndef QR_COMM_BACKEND_H_
#define QR_COMM_BACKEND_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "ipc/group_client.h"
#include "kernels/types.h"

namespace qr {

// One all-reduce as the communicator hands it to a backend. Arguments are
// already validated (non-null pointers, count > 0, bytes % 16 == 0, bytes <=
// the configured maximum, codec legal for the world size); `codec` is the
// effective one (policy already fell back to FP below the codec threshold).
struct AllReduceCall {
  const void* in = nullptr;  // count elements of dtype; may equal out
  void* out = nullptr;       // count elements of dtype
  size_t count = 0;          // elements, > 0
  DType dtype = DType::kFloat16;
  Codec codec = Codec::kFp;
  bool cast_bf16_to_fp16 = false;  // bf16 reduced through fp16 (saturating)
  void* stream = nullptr;          // GPU: the caller's stream; host: ignored
  // Chosen by ChooseAlgorithm (comm/policy.h); kOneShot ignores `codec`.
  Algorithm algorithm = Algorithm::kTwoShot;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "host" for the host backend, else the GPU's PCI bus id; sent in JOIN so
  // the broker can refuse the same device twice in a group.
  virtual std::string device_id() const = 0;
  // Bytes of this rank's shared receive buffers (the geometry); sent in JOIN
  // and required to match across ranks.
  virtual uint64_t buffer_bytes() const = 0;
  // Creates this rank's shared receive buffers once the group segment is
  // known (shared-memory objects must be named `<group.segment_name()>-...`).
  // Backends that allocated everything at creation keep the default.
  [[nodiscard]] virtual Status Allocate(const ipc::GroupMembership& group) {
    (void)group;
    return OkStatus();
  }

  // What blob() holds: a host-segment name or a GPU IPC handle.
  virtual ipc::BlobKind blob_kind() const = 0;
  // What peers need to map this rank's receive buffers (zero-padded).
  virtual std::array<uint8_t, 64> blob() const = 0;

  // Maps the peers' buffers from their published blobs. `members` is indexed
  // by rank and includes this rank. `group` outlives the backend; the backend
  // polls group.abort_word() in every wait and calls group.RaiseAbort() when a
  // wait gives up. Returns kPeerFailed/kTimeout/kUnavailable/kInternal.
  [[nodiscard]] virtual Status Connect(const std::vector<ipc::MemberInfo>& members,
                                       ipc::GroupMembership& group) = 0;

  // Runs one all-reduce. Host: synchronous, returns the outcome. GPU:
  // enqueued on call.stream; a failure inside the kernel is reported by a
  // later AllReduce() or Check(). Returns kPeerFailed when the group was
  // aborted or a peer died, kTimeout when a wait ran out (after raising the
  // group's abort), kInternal on platform errors. Errors are sticky.
  [[nodiscard]] virtual Status AllReduce(const AllReduceCall& call) = 0;

  // The sticky data-path error, or OK. Never blocks.
  [[nodiscard]] virtual Status Check() = 0;

  // False once the data path has failed, even where no call has reported it
  // yet (a GPU kernel that gave up after the last Check()). Never blocks and
  // changes nothing: qr_should_all_reduce asks it before every call.
  virtual bool Healthy() const = 0;
};

}  // namespace qr

#endif  // QR_COMM_BACKEND_H_
