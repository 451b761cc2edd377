#include "kernels/gpu/local_group.h"

#include <atomic>
#include <string>
#include <utility>

#include "common/status_macros.h"
#include "kernels/gpu/max_blocks.h"
#include "kernels/gpu/max_blocks_shared.h"
#include "kernels/platform/gpu_api.h"

namespace qr::kernels {

StatusOr<std::unique_ptr<LocalGroup>> LocalGroup::Create(int world_size, int max_blocks, int gpus) {
  if (gpus <= 0 || gpus > world_size) gpus = world_size;
  const int n = gpu::DeviceCount();
  if (n < gpus) {
    return UnavailableError("needs " + std::to_string(gpus) + " GPUs, found " + std::to_string(n));
  }
  std::unique_ptr<LocalGroup> g(new LocalGroup());
  g->world_size_ = world_size;
  g->gpus_ = gpus;
  if (max_blocks <= 0) {
    QR_ASSIGN_OR_RETURN(const int layout_blocks, DefaultMaxBlocks(0));
    // Rank r on GPU r % gpus: the busiest GPU carries ceil(world_size / gpus).
    max_blocks = SharedGpuMaxBlocks(layout_blocks, (world_size + gpus - 1) / gpus);
  }
  g->max_blocks_ = max_blocks;
  QR_ASSIGN_OR_RETURN(int64_t ticks, gpu::WallClockTicksPerMs(0));
  g->ticks_per_ms_ = static_cast<uint64_t>(ticks);
  const TwoShotLayout layout = MakeTwoShotLayout(max_blocks);
  const size_t state_bytes = TwoShotStateWords(max_blocks) * 4;
  for (int r = 0; r < world_size; ++r) {
    const int device = g->device(r);
    QR_RETURN_IF_ERROR(gpu::SetDevice(device));
    for (int peer = 0; peer < gpus; ++peer) {
      if (peer == device) continue;
      QR_ASSIGN_OR_RETURN(bool can, gpu::CanAccessPeer(device, peer));
      if (!can) {
        return UnavailableError("GPU " + std::to_string(device) + " cannot access GPU " +
                                std::to_string(peer));
      }
      QR_RETURN_IF_ERROR(gpu::EnablePeerAccess(peer));
    }
    QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, gpu::DeviceBuffer::MallocShared(layout.total));
    QR_RETURN_IF_ERROR(gpu::Memset(buffer.get(), 0, layout.total));
    g->buffers_.push_back(std::move(buffer));
    QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer words, gpu::DeviceBuffer::Malloc(state_bytes));
    QR_RETURN_IF_ERROR(gpu::Memset(words.get(), 0, state_bytes));
    g->state_words_.push_back(std::move(words));
    QR_ASSIGN_OR_RETURN(gpu::MappedHostBuffer error, gpu::MappedHostBuffer::Create(4096));
    g->errors_.push_back(std::move(error));
    QR_ASSIGN_OR_RETURN(gpu::ScopedStream stream, gpu::ScopedStream::Create());
    g->streams_.push_back(std::move(stream));
  }
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_ASSIGN_OR_RETURN(g->abort_, gpu::MappedHostBuffer::Create(4096));
  for (int d = 0; d < gpus; ++d) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(d));
    QR_RETURN_IF_ERROR(gpu::DeviceSynchronize());
  }
  return g;
}

// Kernels in flight read the peers' buffers and the abort word; they end on
// their own (done, aborted or timed out) before the members free them.
LocalGroup::~LocalGroup() {
  for (int d = 0; d < gpus_; ++d) {
    if (gpu::SetDevice(d).ok()) (void)gpu::DeviceSynchronize();
  }
}

size_t LocalGroup::buffer_bytes() const { return MakeTwoShotLayout(max_blocks_).total; }

StatusOr<const std::vector<RankState>*> LocalGroup::States(uint64_t timeout_ms) {
  auto it = states_.find(timeout_ms);
  if (it != states_.end()) return &it->second;
  std::vector<RankState> states;
  for (int rank = 0; rank < world_size_; ++rank) {
    RankConfig c;
    c.rank = rank;
    c.world_size = world_size_;
    for (int r = 0; r < world_size_; ++r) c.buffers[r] = buffers_[r].get();
    c.max_blocks = max_blocks_;
    c.state_words = state_words_[rank].as<uint32_t>();
    c.abort_word = static_cast<const uint32_t*>(abort_.device());
    c.error_word = static_cast<uint32_t*>(errors_[rank].device());
    c.timeout_ticks = timeout_ms * ticks_per_ms_;
    c.ticks_per_ms = static_cast<int64_t>(ticks_per_ms_);
    c.programmatic_launch = programmatic_launch_;
    QR_ASSIGN_OR_RETURN(RankState s, RankState::Create(c));
    states.push_back(std::move(s));
  }
  return &states_.emplace(timeout_ms, std::move(states)).first->second;
}

Status LocalGroup::Launch(int rank, const LocalCall& call, const void* in, void* out) {
  QR_ASSIGN_OR_RETURN(const std::vector<RankState>* states, States(call.timeout_ms));
  QR_RETURN_IF_ERROR(gpu::SetDevice(device(rank)));
  const Algorithm algorithm = call.one_shot ? Algorithm::kOneShot : Algorithm::kTwoShot;
  return (*states)[rank].Launch(
      {in, out, call.count, call.format, call.codec, algorithm, call.collective},
      streams_[rank].get());
}

Status LocalGroup::LaunchAll(const LocalCall& call, const std::vector<const void*>& ins,
                             const std::vector<void*>& outs) {
  for (int r = 0; r < world_size_; ++r) QR_RETURN_IF_ERROR(Launch(r, call, ins[r], outs[r]));
  return OkStatus();
}

Status LocalGroup::Synchronize() {
  for (int r = 0; r < world_size_; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(device(r)));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams_[r].get()));
  }
  return OkStatus();
}

void LocalGroup::SetProgrammaticLaunch(int mode) {
  programmatic_launch_ = mode;
  states_.clear();
}

void LocalGroup::RaiseAbort() {
  reinterpret_cast<std::atomic<uint32_t>*>(abort_.host())->store(1, std::memory_order_seq_cst);
}

uint32_t LocalGroup::error(int rank) const {
  return reinterpret_cast<const std::atomic<uint32_t>*>(errors_[rank].host())
      ->load(std::memory_order_acquire);
}

}  // namespace qr::kernels
