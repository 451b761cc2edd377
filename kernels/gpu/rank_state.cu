// RankState (rank_state.h): the join-time validation and parameter template,
// and the per-call path (validate the request, fill in its buffers, size the
// grid, launch). One function per decision, so that a new kernel parameter or
// grid rule touches one place.
#include <hip/hip_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "common/env_vars.h"
#include "common/status_macros.h"
#include "kernels/collective_layout.h"
#include "kernels/gpu/collective_kernels.cuh"
#include "kernels/gpu/collective_request.h"
#include "kernels/gpu/one_shot_collective_wire.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/gpu/rank_state_impl.cuh"
#include "kernels/gpu/two_shot_device.cuh"
#include "kernels/platform/gpu_status.h"
#include "kernels/platform/launch.cuh"

namespace qr::kernels {
namespace {

constexpr int kPhaseKernelSlots = kNumWorkFormats * kNumCodecs;
constexpr int kOneShotKernelSlots = 3 * kNumWorkFormats;
static_assert(kOneShotKernelSlots + 3 * kPhaseKernelSlots == kKernelSlots, "one slot per kernel");

Status ValidateConfig(const RankConfig& c) {
  QR_RETURN_IF_ERROR(ValidateWorldSize(c.world_size));
  if (c.rank < 0 || c.rank >= c.world_size) {
    return InvalidArgumentError("rank " + std::to_string(c.rank) + " out of range");
  }
  if (c.max_blocks <= 0) return InvalidArgumentError("max_blocks must be positive");
  if (c.ticks_per_ms <= 0) return InvalidArgumentError("ticks_per_ms must be positive");
  if (c.state_words == nullptr || c.error_word == nullptr) {
    return InvalidArgumentError("null pointer argument");
  }
  for (int r = 0; r < c.world_size; ++r) {
    if (c.buffers[r] == nullptr) return InvalidArgumentError("missing receive buffer of a rank");
  }
  return OkStatus();
}

// Everything but the call's own fields (in, out, bytes, num_tiles). The state
// words are laid out as TwoShotStateWords describes.
gpu::KernelParams ParamsTemplate(const RankConfig& c, const TwoShotLayout& l) {
  gpu::KernelParams p{};
  p.rank = c.rank;
  for (int r = 0; r < c.world_size; ++r) p.buffers[r] = static_cast<char*>(c.buffers[r]);
  p.flags1 = l.flags1;
  p.flags2 = l.flags2;
  p.data1 = l.data1;
  p.data2 = l.data2;
  p.credits = l.credits;
  p.colours = c.state_words;
  p.codec_state = c.state_words + 2 * c.max_blocks + 1;
  p.dev_error = c.state_words + c.max_blocks;
  p.oneshot = l.oneshot;
  p.oneshot_counter = c.state_words + c.max_blocks + 1;
  p.oneshot_blocks = gpu::OneShotStrideBlocks(c.max_blocks, c.world_size);
  p.abort_word = c.abort_word;
  p.error_word = c.error_word;
  p.timeout_ticks = c.timeout_ticks;
  p.abort_read_at = c.state_words + 3 * c.max_blocks + 1;
  p.abort_read_ticks = static_cast<uint32_t>(c.ticks_per_ms * kAbortReadPeriodUs / 1000);
  return p;
}

bool IsOneShot(const AllReduceRequest& r) { return r.algorithm == Algorithm::kOneShot; }

// A reduce-scatter or all-gather (collective_kernels.cuh).
bool IsPhaseCollective(const AllReduceRequest& r) {
  return r.collective == Collective::kReduceScatter || r.collective == Collective::kAllGather;
}

// The request as the kernels run it: a reduce-scatter or all-gather that
// CollectiveRunsOneShot stays kOneShot (its one-shot kernel, FP, the cast
// off); any other one runs on the phase kernel of CollectivePhaseKernel
// (kTwoShot from here on); an all-reduce as it is.
AllReduceRequest KernelRequest(const AllReduceRequest& r, int world_size) {
  if (!IsPhaseCollective(r)) return r;
  AllReduceRequest k = r;
  const PhaseKernelChoice c = CollectivePhaseKernel(r.collective, r.format, r.codec, r.algorithm);
  k.format = c.format;
  k.codec = c.codec;
  k.algorithm =
      CollectiveRunsOneShot(r.collective, r.algorithm, static_cast<int64_t>(r.count), world_size)
          ? Algorithm::kOneShot
          : Algorithm::kTwoShot;
  return k;
}

// Bytes one source puts into a peer's one-shot region.
size_t OneShotWireBytes(const AllReduceRequest& r) {
  if (!IsPhaseCollective(r)) return r.count * 2;
  return static_cast<size_t>(
      OneShotCollectiveWireBytes(r.collective, static_cast<int64_t>(r.count)));
}

// Tiles of a call: the message's for an all-reduce, CollectiveTiles of the
// per-rank count for a reduce-scatter or all-gather.
size_t TilesOf(const AllReduceRequest& r, int world_size) {
  if (IsPhaseCollective(r)) {
    return static_cast<size_t>(CollectiveTiles(static_cast<int64_t>(r.count), world_size));
  }
  return (r.count * 2 + kTileBytes - 1) / kTileBytes;
}

// Of a KernelRequest. count == 0 passes: there is nothing to launch.
Status ValidateRequest(const AllReduceRequest& r, int world_size) {
  if (r.collective != Collective::kAllReduce && !IsPhaseCollective(r)) {
    return InvalidArgumentError(
        "Launch runs all-reduce, reduce-scatter and all-gather requests (the fused collective "
        "goes through LaunchResidualRmsNorm)");
  }
  const size_t bytes = r.count * 2;
  const bool one_shot = IsOneShot(r);
  if (!one_shot && !CodecRunsAtWorldSize(r.codec, world_size)) {
    return InvalidArgumentError("INT3 needs world size 2");
  }
  if (!IsWholeMessageUnits(bytes)) {
    return InvalidArgumentError("message bytes must be a multiple of 16");
  }
  if (one_shot && OneShotWireBytes(r) > static_cast<size_t>(OneShotMaxBytes(world_size))) {
    return InvalidArgumentError(
        "one-shot takes at most " + std::to_string(OneShotMaxBytes(world_size)) +
        " bytes at world size " + std::to_string(world_size) + ", got " + std::to_string(bytes));
  }
  if (r.count == 0) return OkStatus();
  if (r.in == nullptr || r.out == nullptr) return InvalidArgumentError("null pointer argument");
  if (r.count > SIZE_MAX / 2 / kMaxWorldSize || TilesOf(r, world_size) > size_t{INT32_MAX}) {
    return InvalidArgumentError("message too large");
  }
  return OkStatus();
}

// Of a KernelRequest; nullptr for a format or codec outside the enums.
gpu::KernelFn KernelFor(const AllReduceRequest& r, int world_size) {
  const bool one_shot = IsOneShot(r);
  switch (r.collective) {
    case Collective::kReduceScatter:
      return one_shot ? gpu::OneShotReduceScatterKernelFor(r.format, world_size)
                      : gpu::ReduceScatterKernelFor(r.format, world_size, r.codec);
    case Collective::kAllGather:
      return one_shot ? gpu::OneShotAllGatherKernelFor(world_size)
                      : gpu::AllGatherKernelFor(r.format, world_size, r.codec);
    default:
      break;
  }
  return IsOneShot(r) ? gpu::OneShotKernelFor(r.format, world_size)
                      : gpu::TwoShotKernelFor(r.format, world_size, r.codec);
}

// Only for a request KernelFor has a kernel for (valid enum values): the
// one-shot kernels of each family and format, then the flag-family ones of
// each family, format and codec (rank_state_impl.cuh kKernelSlots).
int KernelSlot(const AllReduceRequest& r) {
  const int format = static_cast<int>(r.format);
  const int family = r.collective == Collective::kReduceScatter ? 1
                     : r.collective == Collective::kAllGather   ? 2
                                                                : 0;
  if (IsOneShot(r)) return family * kNumWorkFormats + format;
  return kOneShotKernelSlots + family * kPhaseKernelSlots + format * kNumCodecs +
         static_cast<int>(r.codec);
}

int ThreadsFor(const AllReduceRequest& r) {
  return IsOneShot(r) ? gpu::kOneShotThreads : kTwoShotThreads;
}

// Blocks of `fn` that stay resident at once on the current device, at most
// max_blocks. Every rank runs the same binary on the same GPU model (the
// broker checks the layout, which follows the multiprocessor count), so the
// cap is the same on every rank.
StatusOr<int> ResidentGridCap(const AllReduceRequest& r, gpu::KernelFn fn, int max_blocks) {
  int device = 0;
  QR_GPU_RETURN_IF_ERROR(hipGetDevice(&device));
  int per_sm = 0;
  int sms = 0;
  QR_GPU_RETURN_IF_ERROR(hipOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(fn), ThreadsFor(r), 0));
  QR_GPU_RETURN_IF_ERROR(
      hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device));
  if (per_sm <= 0) return InternalError("kernel cannot be resident on this device");
  // FP is data movement and two blocks per multiprocessor already fill the
  // link; more flood it, up to 10x slower (docs/performance.md,
  // "Measurements behind the kernels' choices"). The integer codecs compute
  // and gain from every resident block.
  if (!IsOneShot(r) && r.codec == Codec::kFp && per_sm > kTwoShotFpBlocksPerSm) {
    per_sm = kTwoShotFpBlocksPerSm;
  }
  return per_sm * sms < max_blocks ? per_sm * sms : max_blocks;
}

// The grid cap of `fn` in `cached`: asked of the runtime on the first call
// (which also loads the kernel), then reused.
StatusOr<int> CachedGridCap(std::atomic<int>& cached, const AllReduceRequest& r, gpu::KernelFn fn,
                            int max_blocks) {
  int cap = cached.load(std::memory_order_relaxed);
  if (cap == 0) {
    QR_ASSIGN_OR_RETURN(cap, ResidentGridCap(r, fn, max_blocks));
    cached.store(cap, std::memory_order_relaxed);
  }
  return cap;
}

// One-shot blocks own fixed rows (one_shot.cu), so its grid follows the
// layout's blocks and cannot be cut to what is resident; a kernel that fits
// the layout's blocks always is. The phase kernels take a block per tile, at
// most the cap, as the two-shot does.
StatusOr<int> GridFor(const AllReduceRequest& r, size_t bytes, int cap, int max_blocks,
                      int world_size) {
  if (IsOneShot(r)) {
    const int grid = gpu::OneShotGrid(OneShotWireBytes(r), max_blocks, world_size);
    if (grid > cap) return InternalError("one-shot grid exceeds the resident blocks");
    return grid;
  }
  if (IsPhaseCollective(r)) {
    const size_t tiles = TilesOf(r, world_size);
    return static_cast<int>(tiles < static_cast<size_t>(cap) ? tiles : cap);
  }
  return TwoShotGrid(bytes, cap);
}

// The kernel a request runs, validated, with its grid cap (loaded on first
// use); fn == nullptr when the request has nothing to launch (count 0).
struct ReadyKernel {
  AllReduceRequest request;
  gpu::KernelFn fn = nullptr;
  int cap = 0;
};
StatusOr<ReadyKernel> ReadyKernelFor(const AllReduceRequest& asked, int ws, int max_blocks,
                                     std::atomic<int>* grid_caps) {
  ReadyKernel k;
  k.request = KernelRequest(asked, ws);
  QR_RETURN_IF_ERROR(ValidateRequest(k.request, ws));
  if (k.request.count == 0) return k;
  k.fn = KernelFor(k.request, ws);
  if (k.fn == nullptr) return InvalidArgumentError("unsupported dtype/codec/world size");
  QR_ASSIGN_OR_RETURN(k.cap,
                      CachedGridCap(grid_caps[KernelSlot(k.request)], k.request, k.fn, max_blocks));
  return k;
}

}  // namespace

Status ValidateAllReduceRequest(const AllReduceRequest& r, int world_size) {
  return ValidateRequest(r, world_size);
}

RankState::RankState(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RankState::RankState(RankState&&) noexcept = default;
RankState& RankState::operator=(RankState&&) noexcept = default;
RankState::~RankState() = default;

StatusOr<RankState> RankState::Create(const RankConfig& config) {
  QR_RETURN_IF_ERROR(ValidateConfig(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->layout = MakeTwoShotLayout(config.max_blocks);
  impl->params = ParamsTemplate(config, impl->layout);
  if (config.programmatic_launch < 0) {
    QR_ASSIGN_OR_RETURN(impl->overlap, kEnvProgrammaticLaunch.Bool());
  } else {
    impl->overlap = config.programmatic_launch > 0;
  }
  return RankState(std::move(impl));
}

int RankState::rank() const { return impl_->config.rank; }
int RankState::world_size() const { return impl_->config.world_size; }
int RankState::max_blocks() const { return impl_->config.max_blocks; }
const TwoShotLayout& RankState::layout() const { return impl_->layout; }

Status RankState::Launch(const AllReduceRequest& asked, ::qr::gpu::Stream stream) const {
  const int ws = impl_->config.world_size;
  QR_ASSIGN_OR_RETURN(const ReadyKernel k,
                      ReadyKernelFor(asked, ws, impl_->config.max_blocks, impl_->grid_cap));
  if (k.fn == nullptr) return OkStatus();
  const AllReduceRequest& request = k.request;
  const size_t bytes = request.count * 2;
  gpu::KernelParams p = impl_->params;
  p.in = static_cast<const char*>(request.in);
  p.out = static_cast<char*>(request.out);
  p.bytes = bytes;
  p.num_tiles = static_cast<int>(TilesOf(request, ws));
  QR_ASSIGN_OR_RETURN(const int grid, GridFor(request, bytes, k.cap, impl_->config.max_blocks, ws));
  QR_GPU_RETURN_IF_ERROR(platform::LaunchKernel(k.fn, dim3(grid), dim3(ThreadsFor(request)),
                                                static_cast<hipStream_t>(stream), impl_->overlap,
                                                p));
  return OkStatus();
}

Status RankState::LoadKernel(const AllReduceRequest& asked) const {
  return ReadyKernelFor(asked, impl_->config.world_size, impl_->config.max_blocks, impl_->grid_cap)
      .status();
}

}  // namespace qr::kernels
