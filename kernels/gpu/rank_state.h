// RankState: what one rank's all-reduce kernels need that stays the same from
// call to call, built once when the rank joins its group (the peers' receive
// buffers, the per-block colours and the other state words, the abort and
// error words, the wait timeout, the grid cap), with the buffer layout and
// the kernels' parameter template computed then. Each call hands over a small
// AllReduceRequest; Launch validates it, fills in the call's buffers and size
// and enqueues ONE kernel (one-shot or two-shot, kernels/gpu/two_shot.h; a
// reduce-scatter or all-gather, one-shot or phase kernel,
// kernels/gpu/collective_kernels.cuh) on the caller's stream, also inside stream capture. Every
// rank must issue the same sequence of requests, as with any collective.
//
//   QR_ASSIGN_OR_RETURN(kernels::RankState state, kernels::RankState::Create(config));
//   QR_RETURN_IF_ERROR(state.Launch({in, out, count, format, codec, algorithm}, stream));
//
// Used by the GPU backend (comm/gpu_backend.cc, one per process) and by
// LocalGroup (one per rank, all in one process).
#ifndef QR_KERNELS_GPU_RANK_STATE_H_
#define QR_KERNELS_GPU_RANK_STATE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/limits.h"
#include "common/status.h"
#include "kernels/gpu/rmsnorm_epilogue.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/types.h"

namespace qr::kernels {

// The join-time inputs. The memory they point to belongs to the caller and
// must outlive the RankState and every kernel it launched.
struct RankConfig {
  int rank = 0;
  int world_size = 0;  // IsSupportedWorldSize
  // Every rank's receive buffer as addressed from this device (own included),
  // each at least MakeTwoShotLayout(max_blocks).total bytes, zeroed once.
  std::array<void*, kMaxWorldSize> buffers{};
  int max_blocks = 0;  // the grid cap, the same on every rank; it fixes the layout
  // Device memory of TwoShotStateWords(max_blocks) words, zeroed once: the
  // per-block colours, then this rank's device-side error word, one-shot
  // counters, two-shot codec state words and when the abort word was last read.
  uint32_t* state_words = nullptr;
  const uint32_t* abort_word = nullptr;  // device-visible; non-zero = give up (may be null)
  uint32_t* error_word = nullptr;        // device-visible host-mapped word (required)
  uint64_t timeout_ticks = 0;            // device wall-clock ticks per wait; 0 = none
  int64_t ticks_per_ms = 0;              // device wall-clock rate (gpu::WallClockTicksPerMs), > 0
  // Launch every kernel with programmatic overlap of the previous kernel on
  // the stream where the GPU has it (kernels/platform/launch.cuh): 1 on, 0
  // off, -1 as QR_PROGRAMMATIC_LAUNCH says (common/env_vars.h).
  int programmatic_launch = -1;
};

// One all-reduce: `count` elements of `format` from `in` (device memory of
// this rank's GPU) summed over the group into `out`; in == out allowed.
struct AllReduceRequest {
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;  // count * 2 whole kMessageAlignBytes; 0 does nothing
  WorkFormat format = WorkFormat::kFp16;
  Codec codec = Codec::kFp;  // two-shot only; one-shot moves exact values
  // kOneShot needs count * 2 <= OneShotMaxBytes(world_size).
  Algorithm algorithm = Algorithm::kTwoShot;
  // kAllReduce, or kReduceScatter / kAllGather with `count` per rank: a
  // reduce-scatter's `in` holds world_size * count values and its `out`
  // count (out == in + rank * count allowed), an all-gather's `in` count and
  // its `out` world_size * count (in == out + rank * count allowed);
  // kernels/collective_layout.h. Their `algorithm` is the policy's choice
  // for the whole message; kOneShot moves exact values, on the one-shot
  // kernel where its wire fits the one-shot region, else on the FP phase
  // kernel (kernels/gpu/collective_request.h): no size limit of its own.
  // kAllReduceResidualRmsNorm goes through LaunchResidualRmsNorm.
  Collective collective = Collective::kAllReduce;
};

class RankState {
 public:
  // Validates the configuration without touching the GPU. kInvalidArgument
  // for an unsupported world size, a rank outside it, max_blocks <= 0, a
  // missing receive buffer, or null state or error words.
  [[nodiscard]] static StatusOr<RankState> Create(const RankConfig& config);

  RankState(RankState&&) noexcept;
  RankState& operator=(RankState&&) noexcept;
  ~RankState();

  int rank() const;
  int world_size() const;
  int max_blocks() const;
  const TwoShotLayout& layout() const;

  // Enqueues `request` on `stream`, which belongs to the current device (the
  // one the buffers were made on). kInvalidArgument for a bad request (odd
  // size, null buffers, INT3 at world size != 2, a one-shot all-reduce too
  // large, an unsupported format or collective), checked before the GPU is
  // touched; kInternal on
  // a launch error. The first launch of each kernel asks the runtime how many
  // of its blocks stay resident (its grid cap), later ones reuse the answer.
  // Safe to call from several threads on distinct streams.
  [[nodiscard]] Status Launch(const AllReduceRequest& request, ::qr::gpu::Stream stream) const;

  // Whether LaunchResidualRmsNorm runs `request` + `norm` as one kernel.
  bool FusedOneLaunch(const AllReduceRequest& request, const ResidualRmsNormRequest& norm) const;

  // Whether LaunchResidualRmsNorm runs `request` + `norm` in the row-split
  // form (norm.split_rows, a two-shot request, SplitRowsExact).
  bool SplitRows(const AllReduceRequest& request, const ResidualRmsNormRequest& norm) const;

  // Collective::kAllReduceResidualRmsNorm (docs/fused.md): the all-reduce
  // `request` (whose out must be norm.norm_out) and then the residual add and
  // RMSNorm epilogue (kernels/gpu/rmsnorm_epilogue.h), on `stream`: one
  // kernel for a one-shot request whose token rows fit the fused kernel's
  // slots (kernels/gpu/one_shot_fused_slots.h) when norm.one_launch; the
  // row-split form (rank_state_split.cu) where SplitRows; else the
  // all-reduce's kernel and the epilogue's. Both requests are validated
  // before anything is enqueued: Launch's errors, plus kInvalidArgument for
  // an epilogue that does not match the request or is malformed.
  [[nodiscard]] Status LaunchResidualRmsNorm(const AllReduceRequest& request,
                                             const ResidualRmsNormRequest& norm,
                                             ::qr::gpu::Stream stream) const;

 private:
  struct Impl;
  explicit RankState(std::unique_ptr<Impl> impl);
  // The one-launch kernel's shape for `request` + `norm`, or one whose
  // slots have no grid when LaunchResidualRmsNorm does not run them as one
  // kernel (computed once a call: the slot fit walks every block).
  FusedLaunchShape OneLaunchShape(const AllReduceRequest& request,
                                  const ResidualRmsNormRequest& norm) const;
  [[nodiscard]] Status LaunchFusedOneShot(const AllReduceRequest& request,
                                          const ResidualRmsNormRequest& norm,
                                          const FusedLaunchShape& shape,
                                          ::qr::gpu::Stream stream) const;
  [[nodiscard]] Status LaunchSplitRows(const AllReduceRequest& request,
                                       const ResidualRmsNormRequest& norm,
                                       ::qr::gpu::Stream stream) const;
  // Validates `request` as Launch does and loads its kernel (caching its
  // grid cap) without launching it: a launcher that enqueues several
  // collective kernels for one call loads them all before the first
  // (LoadResidualRmsNormEpilogue, rmsnorm_epilogue.h, says why).
  [[nodiscard]] Status LoadKernel(const AllReduceRequest& request) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_RANK_STATE_H_
