#include "comm/gpu_backend.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/bounded_wait.h"
#include "comm/topology.h"
#include "common/limits.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "ipc/group_client.h"
#include "kernels/gpu/max_blocks.h"
#include "kernels/gpu/max_blocks_shared.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/device_info.h"
#include "kernels/platform/gpu_api.h"

namespace qr {
namespace {

constexpr size_t kAbortPageBytes = 4096;
// The join barrier's words, past the kernels' layout in every receive
// buffer: word r is set by rank r once it has opened this buffer.
constexpr size_t kBarrierBytes = kMaxWorldSize * sizeof(uint32_t);

class GpuBackend final : public Backend {
 public:
  GpuBackend(int device, int rank, int world_size, int64_t op_timeout_ms, int64_t join_timeout_ms)
      : device_(device),
        rank_(rank),
        ws_(world_size),
        timeout_ms_(op_timeout_ms),
        join_timeout_ms_(join_timeout_ms) {}

  // Kernels in flight read the peers' buffers and the abort page; they end
  // on their own (done, aborted or timed out) before the members unmap and
  // free them.
  ~GpuBackend() override {
    if (!gpu::SetDevice(device_).ok()) return;
    Status s = gpu::DeviceSynchronize();
    if (!s.ok()) Log().warn("GPU backend rank {}: {}", rank_, s.ToString());
  }

  Status Init() {
    QR_RETURN_IF_ERROR(gpu::SetDevice(device_));
    QR_ASSIGN_OR_RETURN(pci_, gpu::PciBusId(device_));
    QR_ASSIGN_OR_RETURN(max_blocks_, kernels::DefaultMaxBlocks(device_));
    QR_ASSIGN_OR_RETURN(ticks_per_ms_, gpu::WallClockTicksPerMs(device_));
    layout_ = kernels::MakeTwoShotLayout(max_blocks_);
    QR_ASSIGN_OR_RETURN(buffer_, gpu::DeviceBuffer::MallocShared(layout_.total + kBarrierBytes));
    QR_RETURN_IF_ERROR(gpu::Memset(buffer_.get(), 0, buffer_.bytes()));
    const size_t state_bytes = kernels::TwoShotStateWords(max_blocks_) * 4;
    QR_ASSIGN_OR_RETURN(state_words_, gpu::DeviceBuffer::Malloc(state_bytes));
    QR_RETURN_IF_ERROR(gpu::Memset(state_words_.get(), 0, state_bytes));
    QR_ASSIGN_OR_RETURN(error_, gpu::MappedHostBuffer::Create(4096));
    QR_ASSIGN_OR_RETURN(handle_, gpu::IpcGetHandle(buffer_.get()));
    QR_RETURN_IF_ERROR(gpu::DeviceSynchronize());
    peers_.resize(ws_);
    return OkStatus();
  }

  std::string device_id() const override { return pci_; }
  // The layout follows the multiprocessor count, so GPUs that would launch
  // different grids also differ here and the broker refuses the mix.
  uint64_t buffer_bytes() const override { return layout_.total; }
  ipc::BlobKind blob_kind() const override { return ipc::BlobKind::kGpuIpcHandle; }
  std::array<uint8_t, 64> blob() const override {
    std::array<uint8_t, 64> b{};
    std::memcpy(b.data(), handle_.data(), handle_.size());
    return b;
  }

  Status Connect(const std::vector<PeerBuffer>& members, GroupControl& group) override {
    QR_RETURN_IF_ERROR(gpu::SetDevice(device_));
    if (static_cast<int>(members.size()) != ws_) {
      return InternalError("expected " + std::to_string(ws_) + " members, got " +
                           std::to_string(members.size()));
    }
    std::vector<std::string> devices(ws_);
    for (const PeerBuffer& m : members) {
      if (m.rank < 0 || m.rank >= ws_) return InternalError("member rank out of range");
      devices[m.rank] = m.device_id;
    }
    // Every pair of the group's GPUs, not only this rank's, by PCI bus id
    // (comm/topology.h): also with one visible GPU per process.
    std::vector<std::string> undecided;
    QR_RETURN_IF_ERROR(CheckPeerAccess(devices, &gpu::PeerAccessByPciBusId, &undecided));
    for (const std::string& pair : undecided) {
      Log().info(
          "GPU backend rank {}: peer access {} is not known here; opening the handles and "
          "the join barrier's stores decide it",
          rank_, pair);
    }
    for (const PeerBuffer& m : members) {
      if (m.rank == rank_) continue;
      const std::string who = "rank " + std::to_string(m.rank);
      if (m.kind != ipc::BlobKind::kGpuIpcHandle) {
        return InvalidArgumentError(who + " is not on a GPU; a group cannot mix backends");
      }
      if (m.buffer_bytes != layout_.total) {
        return InvalidArgumentError(who + " has a different buffer geometry");
      }
      gpu::IpcHandle h;
      std::memcpy(h.data(), m.blob.data(), h.size());
      auto p = gpu::IpcMapping::Open(h);
      if (!p.ok()) return p.status().WithContext(who);
      peers_[m.rank] = std::move(*p);
    }
    // Every rank sees the same slots, so all compute the same cap; the layout
    // offsets follow it, inside the buffer allocated for the larger default.
    const int sharing = kernels::MostRanksPerDevice(devices);
    max_blocks_ = kernels::SharedGpuMaxBlocks(max_blocks_, sharing);
    if (sharing > 1) {
      Log().info("GPU backend rank {}: {} ranks share GPU {} at most; grids capped at {} blocks",
                 rank_, sharing, pci_, max_blocks_);
    }
    QR_ASSIGN_OR_RETURN(abort_, gpu::HostRegistration::Create(group.abort_page(), kAbortPageBytes));
    QR_ASSIGN_OR_RETURN(kernels::RankState state, kernels::RankState::Create(KernelConfig()));
    state_ = std::move(state);
    group_ = &group;
    return JoinBarrier();
  }

  Status AllReduce(const AllReduceCall& call) override {
    if (!state_.has_value()) return InternalError("AllReduce before Connect");
    // The stream belongs to our device; launch there and restore the
    // caller's current device.
    QR_ASSIGN_OR_RETURN(gpu::ScopedDevice on_device, gpu::ScopedDevice::Set(device_));
    const kernels::AllReduceRequest request{
        call.in,    call.out,      call.count, WorkFormatOf(call.dtype, call.cast_bf16_to_fp16),
        call.codec, call.algorithm};
    if (call.collective == Collective::kAllReduceResidualRmsNorm) {
      const ResidualRmsNormArgs& n = call.norm;
      return state_->LaunchResidualRmsNorm(
          request,
          {call.dtype, n.residual, n.weight, n.residual_out, call.out, n.tokens, n.hidden, n.eps,
           n.quant_out, n.quant_scale},
          call.stream);
    }
    // kAllReduce, kReduceScatter or kAllGather: one kernel each
    // (kernels/gpu/rank_state.h), the same launch path.
    kernels::AllReduceRequest kind = request;
    kind.collective = call.collective;
    return state_->Launch(kind, call.stream);
  }

  // The kernel's error word, as the communicator reads it once per call (it
  // keeps the first failure and raises the group's abort on a timeout).
  Status Failure() const override {
    const uint32_t e = KernelError();
    if (e == kernels::kGpuErrorNone) return OkStatus();
    if (e == kernels::kGpuErrorTimeout) {
      return TimeoutError("rank " + std::to_string(rank_) + " timed out in a GPU wait (past " +
                          std::to_string(timeout_ms_) + " ms, QR_OP_TIMEOUT_MS)");
    }
    return PeerFailedError("rank " + std::to_string(rank_) +
                           ": the group was aborted (a peer failed); the GPU kernel gave up");
  }

 private:
  // The kernels' join-time state: the peers' buffers as mapped here, the
  // grid cap Connect() settled on, the state, abort and error words.
  kernels::RankConfig KernelConfig() const {
    kernels::RankConfig c;
    c.rank = rank_;
    c.world_size = ws_;
    for (int r = 0; r < ws_; ++r) c.buffers[r] = r == rank_ ? buffer_.get() : peers_[r].get();
    c.max_blocks = max_blocks_;
    c.state_words = state_words_.as<uint32_t>();
    c.abort_word = static_cast<const uint32_t*>(abort_.device());
    c.error_word = static_cast<uint32_t*>(error_.device());
    c.timeout_ticks = static_cast<uint64_t>(timeout_ms_) * static_cast<uint64_t>(ticks_per_ms_);
    c.ticks_per_ms = ticks_per_ms_;
    return c;
  }

  // What a kernel of this rank wrote into the host-mapped error word.
  uint32_t KernelError() const {
    if (error_.host() == nullptr) return kernels::kGpuErrorNone;
    return reinterpret_cast<const std::atomic<uint32_t>*>(error_.host())
        ->load(std::memory_order_acquire);
  }

  // Every rank marks each peer's buffer once it has opened it (its word past
  // the kernels' layout), then waits until every peer has marked its own.
  // After that no peer still has to open this rank's handle, so a rank may
  // leave (and free its buffer) right after joining. Host-driven copies on a
  // private stream, no kernel: the kernels' colours and counters stay
  // untouched, and the wait, which lasts as long as the slowest peer's
  // mapping, is bounded by the join's timeout (not QR_OP_TIMEOUT_MS) and
  // polls the group's abort word, so a dead peer ends it at once.
  Status JoinBarrier() {
    auto stream = gpu::ScopedStream::Create();
    if (!stream.ok()) return stream.status().WithContext("GPU join barrier");
    return RunJoinBarrier(stream->get()).WithContext("GPU join barrier");
  }

  Status RunJoinBarrier(gpu::Stream stream) {
    const uint32_t marked = 1;
    for (int r = 0; r < ws_; ++r) {
      if (r == rank_) continue;
      uint8_t* word =
          static_cast<uint8_t*>(peers_[r].get()) + layout_.total + rank_ * sizeof(uint32_t);
      QR_RETURN_IF_ERROR(gpu::MemcpyAsync(word, &marked, sizeof(marked), stream));
    }
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(stream));
    const uint8_t* mine = buffer_.as<const uint8_t>() + layout_.total;
    std::array<uint32_t, kMaxWorldSize> marks{};
    Status copy;
    int missing = -1;
    auto ready = [&] {
      copy = gpu::MemcpyAsync(marks.data(), mine, ws_ * sizeof(uint32_t), stream);
      if (copy.ok()) copy = gpu::StreamSynchronize(stream);
      if (!copy.ok()) return true;
      for (int r = 0; r < ws_; ++r) {
        if (r != rank_ && marks[r] == 0) {
          missing = r;
          return false;
        }
      }
      return true;
    };
    const volatile uint32_t* abort_word = group_->abort_word();
    auto aborted = [&] { return __atomic_load_n(abort_word, __ATOMIC_ACQUIRE) != 0; };
    const auto deadline = WaitClock::now() + std::chrono::milliseconds(join_timeout_ms_);
    Status s = BoundedWait(ready, aborted, deadline, "peers to map this rank's buffer");
    QR_RETURN_IF_ERROR(copy);
    if (s.code() == StatusCode::kTimeout) {
      return TimeoutError("rank " + std::to_string(rank_) + " " + s.message() + " from rank " +
                          std::to_string(missing) + " after " + std::to_string(join_timeout_ms_) +
                          " ms (join timeout)");
    }
    if (s.code() == StatusCode::kPeerFailed) {
      Status g = group_->Check();
      return g.ok() ? s : g;
    }
    return s;
  }

  const int device_;
  const int rank_;
  const int ws_;
  std::string pci_;
  // The launches' grid cap and layout: DefaultMaxBlocks, lowered by Connect()
  // when ranks share a GPU. layout_ (the allocation) keeps the default.
  int max_blocks_ = 0;
  int64_t ticks_per_ms_ = 0;
  const int64_t timeout_ms_;
  const int64_t join_timeout_ms_;
  kernels::TwoShotLayout layout_;
  gpu::DeviceBuffer buffer_;  // this rank's receive buffer, then the barrier words
  gpu::DeviceBuffer state_words_;
  gpu::MappedHostBuffer error_;
  gpu::IpcHandle handle_{};
  std::vector<gpu::IpcMapping> peers_;  // empty at this rank's own index
  gpu::HostRegistration abort_;
  std::optional<kernels::RankState> state_;  // built by Connect()
  GroupControl* group_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(int device, int rank, int world_size,
                                                    int64_t op_timeout_ms,
                                                    int64_t join_timeout_ms) {
  QR_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  if (rank < 0 || rank >= world_size) {
    return InvalidArgumentError("rank " + std::to_string(rank) + " is outside [0, " +
                                std::to_string(world_size) + ")");
  }
  if (op_timeout_ms <= 0 || join_timeout_ms <= 0) {
    return InvalidArgumentError("op_timeout_ms and join_timeout_ms must be positive, got " +
                                std::to_string(op_timeout_ms) + " and " +
                                std::to_string(join_timeout_ms));
  }
  const int n = gpu::DeviceCount();
  if (device < 0 || device >= n) {
    return UnavailableError("GPU " + std::to_string(device) + " does not exist (" +
                            std::to_string(n) + " visible)");
  }
  auto b = std::make_unique<GpuBackend>(device, rank, world_size, op_timeout_ms, join_timeout_ms);
  QR_RETURN_IF_ERROR(b->Init());
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace qr
