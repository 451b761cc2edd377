// Backend: the data path of one communicator, behind a small interface, and
// GroupControl: the little of the group a backend needs.
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
//   4. AllReduce() any number of times; Failure() at any time;
//   5. destroyed before LEAVE: frees and unlinks whatever this rank created.
// Not thread-safe: the communicator serialises calls (the C ABI is
// thread-compatible, one communicator per thread).
//
// Failure has one owner: the communicator keeps the first error of the data
// path or the group (sticky) and refuses every later call with it. Backends
// report what went wrong, call by call, and remember nothing.
//
// A backend sees the group only through GroupControl: in a communicator that
// is the broker membership (ipc/group_client.h); in tests it can be an
// in-process fake, so a backend runs without a broker
// (comm/host_backend_test.cc).
#ifndef QR_COMM_BACKEND_H_
#define QR_COMM_BACKEND_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/types.h"

namespace qr {
namespace ipc {
// What a member's published 64-byte blob holds; the enumerators are in
// ipc/group_client.h, which backends include where they name one.
enum class BlobKind : uint32_t;
}  // namespace ipc

// The group as a backend sees it. Valid from Allocate() until the backend is
// destroyed; abort_word() may be read from any thread (or a GPU) meanwhile.
class GroupControl {
 public:
  virtual ~GroupControl() = default;
  // Shared-memory objects a backend creates for its data are named
  // `<segment_name()>-<suffix>`, suffix in [A-Za-z0-9._-], so that whoever
  // cleans up after the group finds them.
  virtual const std::string& segment_name() const = 0;
  // Non-zero once the group failed or was aborted: every wait polls it. It
  // sits at offset 0 of abort_page(), a page-aligned 4096-byte page a GPU
  // backend maps into the device.
  virtual const volatile uint32_t* abort_word() const = 0;
  virtual void* abort_page() const = 0;
  // Never blocks: OK, or kPeerFailed saying why once the abort word is up.
  [[nodiscard]] virtual Status Check() = 0;
  // Raises the abort word, so every member's waits and kernels give up, with
  // `reason` for them to report.
  [[nodiscard]] virtual Status RaiseAbort(std::string_view reason) = 0;
};

// One member's published slot, as Connect() receives it.
struct PeerBuffer {
  int rank = -1;
  std::string device_id;           // "host", or the GPU's PCI bus id
  ipc::BlobKind kind{};            // what blob holds
  std::array<uint8_t, 64> blob{};  // that member's Backend::blob()
  uint64_t buffer_bytes = 0;       // that member's Backend::buffer_bytes()
};

// What Collective::kAllReduceResidualRmsNorm adds to an all-reduce
// (docs/fused.md). Validated by the communicator (comm/fused_call.h).
struct ResidualRmsNormArgs {
  const void* residual = nullptr;  // tokens x hidden of dtype, or nullptr: none
  const void* weight = nullptr;    // hidden values of dtype
  void* residual_out = nullptr;    // tokens x hidden; may equal in or residual
  size_t tokens = 0;               // tokens * hidden == count
  size_t hidden = 0;               // a multiple of 8
  float eps = 0;
  // The FP8 output (qr_all_reduce_residual_rmsnorm_fp8): tokens x hidden
  // e4m3 bytes and the fp32 scale they divide by (device memory on a GPU,
  // host memory on the host backend). Both nullptr: none.
  void* quant_out = nullptr;
  const float* quant_scale = nullptr;
};

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
  // What the request computes. kReduceScatter: `count` is the per-rank
  // count (recvcount), `in` holds world_size * count values, `out` count;
  // kAllGather: `in` holds count (sendcount), `out` world_size * count
  // (comm/host_collectives.h, kernels/collective_layout.h).
  // kAllReduceResidualRmsNorm: the all-reduce lands in `out` (norm_out,
  // which may equal `in`), then the epilogue of `norm` runs on it.
  Collective collective = Collective::kAllReduce;
  ResidualRmsNormArgs norm;  // kAllReduceResidualRmsNorm only
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
  [[nodiscard]] virtual Status Allocate(const GroupControl& group) {
    (void)group;
    return OkStatus();
  }

  // What blob() holds: a host-segment name or a GPU IPC handle.
  virtual ipc::BlobKind blob_kind() const = 0;
  // What peers need to map this rank's receive buffers (zero-padded).
  virtual std::array<uint8_t, 64> blob() const = 0;

  // Maps the peers' buffers from their published blobs. `members` is indexed
  // by rank and includes this rank. `group` outlives the backend; the backend
  // polls group.abort_word() in every wait and calls group.RaiseAbort() when
  // a wait of its own gives up. Ends with a barrier: once it returns OK every
  // peer has mapped this rank's buffers. Returns kPeerFailed/kTimeout/
  // kUnavailable/kInvalidArgument/kInternal.
  [[nodiscard]] virtual Status Connect(const std::vector<PeerBuffer>& members,
                                       GroupControl& group) = 0;

  // Runs one all-reduce. Host: synchronous, returns the outcome. GPU:
  // enqueued on call.stream; a failure inside the kernel is reported by
  // Failure() afterwards. Returns kPeerFailed when the group was aborted or
  // a peer died, kTimeout when a wait ran out (after raising the group's
  // abort), kInternal on platform errors.
  [[nodiscard]] virtual Status AllReduce(const AllReduceCall& call) = 0;

  // A failure of the data path that no call has returned (a GPU kernel that
  // gave up after its launch: kTimeout or kPeerFailed), else OK. Never
  // blocks and changes nothing: the communicator reads it once per call and
  // for qr_should_all_reduce.
  [[nodiscard]] virtual Status Failure() const = 0;
};

}  // namespace qr

#endif  // QR_COMM_BACKEND_H_
