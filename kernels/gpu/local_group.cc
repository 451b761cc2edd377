#include "kernels/gpu/local_group.h"

#include <atomic>
#include <string>

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
  g->buffers_.assign(world_size, nullptr);
  g->colours_.assign(world_size, nullptr);
  g->error_host_.assign(world_size, nullptr);
  g->error_dev_.assign(world_size, nullptr);
  g->streams_.assign(world_size, nullptr);
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
    QR_ASSIGN_OR_RETURN(g->buffers_[r], gpu::MallocShared(layout.total));
    QR_RETURN_IF_ERROR(gpu::Memset(g->buffers_[r], 0, layout.total));
    const size_t state_bytes = TwoShotStateWords(max_blocks) * 4;
    QR_ASSIGN_OR_RETURN(g->colours_[r], gpu::Malloc(state_bytes));
    QR_RETURN_IF_ERROR(gpu::Memset(g->colours_[r], 0, state_bytes));
    QR_ASSIGN_OR_RETURN(g->error_host_[r], gpu::HostAllocMapped(4096, &g->error_dev_[r]));
    QR_ASSIGN_OR_RETURN(g->streams_[r], gpu::StreamCreate());
  }
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_ASSIGN_OR_RETURN(g->abort_host_, gpu::HostAllocMapped(4096, &g->abort_dev_));
  for (int d = 0; d < gpus; ++d) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(d));
    QR_RETURN_IF_ERROR(gpu::DeviceSynchronize());
  }
  return g;
}

LocalGroup::~LocalGroup() {
  for (int r = 0; r < world_size_; ++r) {
    if (!gpu::SetDevice(device(r)).ok()) continue;
    (void)gpu::DeviceSynchronize();
    gpu::StreamDestroy(streams_[r]);
    gpu::Free(buffers_[r]);
    gpu::Free(colours_[r]);
    gpu::HostFree(error_host_[r]);
  }
  gpu::HostFree(abort_host_);
}

size_t LocalGroup::buffer_bytes() const { return MakeTwoShotLayout(max_blocks_).total; }

Status LocalGroup::Launch(int rank, const LocalCall& call, const void* in, void* out) {
  QR_RETURN_IF_ERROR(gpu::SetDevice(device(rank)));
  TwoShotArgs a;
  a.in = in;
  a.out = out;
  a.count = call.count;
  a.format = call.format;
  a.codec = call.codec;
  a.rank = rank;
  a.world_size = world_size_;
  for (int r = 0; r < world_size_; ++r) a.buffers[r] = buffers_[r];
  a.max_blocks = max_blocks_;
  a.colours = static_cast<uint32_t*>(colours_[rank]);
  a.abort_word = static_cast<const uint32_t*>(abort_dev_);
  a.error_word = static_cast<uint32_t*>(error_dev_[rank]);
  a.timeout_ticks = call.timeout_ms * ticks_per_ms_;
  a.stream = streams_[rank];
  a.one_shot = call.one_shot;
  return LaunchAllReduce(a);
}

Status LocalGroup::LaunchAll(const LocalCall& call, const std::vector<const void*>& ins,
                             const std::vector<void*>& outs) {
  for (int r = 0; r < world_size_; ++r) QR_RETURN_IF_ERROR(Launch(r, call, ins[r], outs[r]));
  return OkStatus();
}

Status LocalGroup::Synchronize() {
  for (int r = 0; r < world_size_; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(device(r)));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams_[r]));
  }
  return OkStatus();
}

void LocalGroup::RaiseAbort() {
  reinterpret_cast<std::atomic<uint32_t>*>(abort_host_)->store(1, std::memory_order_seq_cst);
}

uint32_t LocalGroup::error(int rank) const {
  return reinterpret_cast<const std::atomic<uint32_t>*>(error_host_[rank])
      ->load(std::memory_order_acquire);
}

}  // namespace qr::kernels
