// LocalGroup: all ranks of a two-shot group driven from ONE process, one GPU
// per rank (or, for kernel-logic tests only, several ranks sharing a GPU),
// with peer access instead of IPC handles. For GPU tests and
// qr-bench: it needs neither the broker nor the client library, yet launches
// the very kernels the GPU backend does, through one RankState per rank
// (kernels/gpu/rank_state.h).
//
//   QR_ASSIGN_OR_RETURN(auto g, LocalGroup::Create(2));
//   QR_RETURN_IF_ERROR(g->LaunchAll(call, ins, outs));   // enqueue on every rank
//   QR_RETURN_IF_ERROR(g->Synchronize());
//
// Not thread-safe. Every method may change the calling thread's current device.
#ifndef QR_KERNELS_GPU_LOCAL_GROUP_H_
#define QR_KERNELS_GPU_LOCAL_GROUP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/gpu/rank_state.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"

namespace qr::kernels {

struct LocalCall {
  WorkFormat format = WorkFormat::kFp16;
  Codec codec = Codec::kFp;
  size_t count = 0;             // elements per rank
  uint64_t timeout_ms = 10000;  // per wait inside the kernel; 0 = unbounded
  bool one_shot = false;        // AllReduceRequest::algorithm is kOneShot
  // AllReduceRequest::collective: kAllReduce, kReduceScatter or kAllGather
  // (count per rank; rank_state.h says what in and out hold).
  Collective collective = Collective::kAllReduce;
};

class LocalGroup {
 public:
  // GPUs 0..world_size-1. kUnavailable when there are too few GPUs or a pair
  // lacks peer access; kInternal on runtime errors. max_blocks <= 0: the
  // backend's default (multiprocessors x kTwoShotBlocksPerSm).
  //
  // gpus > 0 spreads the ranks over GPUs 0..gpus-1 (rank r on GPU r % gpus).
  // It exists to run the kernels of every world size where fewer GPUs are
  // available (all ranks on GPU 0 with gpus = 1), and checks their logic, not
  // their speed. Ranks sharing a GPU wait on each other inside their kernels,
  // so all their blocks must be resident at once: the default max_blocks is
  // then SharedGpuMaxBlocks (kernels/gpu/max_blocks_shared.h), the cap a real
  // group sharing a GPU under QR_ALLOW_SHARED_DEVICE uses too.
  [[nodiscard]] static StatusOr<std::unique_ptr<LocalGroup>> Create(int world_size,
                                                                    int max_blocks = 0,
                                                                    int gpus = 0);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int world_size() const { return world_size_; }
  int max_blocks() const { return max_blocks_; }
  int device(int rank) const { return rank % gpus_; }
  void* stream(int rank) const { return streams_[rank].get(); }
  size_t buffer_bytes() const;

  // Enqueues one call (an all-reduce, reduce-scatter or all-gather) for
  // `rank` only (on its device and stream). in/out are that rank's device
  // buffers.
  [[nodiscard]] Status Launch(int rank, const LocalCall& call, const void* in, void* out);
  // Enqueues the call on every rank: ins[r]/outs[r] live on GPU device(r).
  [[nodiscard]] Status LaunchAll(const LocalCall& call, const std::vector<const void*>& ins,
                                 const std::vector<void*>& outs);
  // Enqueues the fused all-reduce + residual add + RMSNorm for `rank`: the
  // all-reduce of `call` from `in` into norm.norm_out, then the epilogue
  // (RankState::LaunchResidualRmsNorm). Buffers on device(rank).
  [[nodiscard]] Status LaunchResidualRmsNorm(int rank, const LocalCall& call, const void* in,
                                             const ResidualRmsNormRequest& norm);
  // Whether LaunchResidualRmsNorm runs `call` + `norm` as one kernel
  // (RankState::FusedOneLaunch), the same on every rank.
  [[nodiscard]] StatusOr<bool> FusedOneLaunch(const LocalCall& call,
                                              const ResidualRmsNormRequest& norm);
  // Whether it runs them in the row-split form (RankState::SplitRows).
  [[nodiscard]] StatusOr<bool> FusedSplitRows(const LocalCall& call,
                                              const ResidualRmsNormRequest& norm);
  [[nodiscard]] Status Synchronize();

  // Programmatic dependent launch for the launches after this call
  // (RankConfig::programmatic_launch: 1 on, 0 off, -1 QR_PROGRAMMATIC_LAUNCH,
  // the default). Call with nothing in flight; the kernels' state words are
  // kept, only the per-rank launch state is rebuilt.
  void SetProgrammaticLaunch(int mode);

  // The group's abort word (host memory mapped into every GPU).
  void RaiseAbort();
  // What rank's kernel wrote into its error word (kGpuError*).
  uint32_t error(int rank) const;

 private:
  LocalGroup() = default;
  // Every rank's RankState for kernels that wait at most timeout_ms, built
  // on the first call with that timeout.
  StatusOr<const std::vector<RankState>*> States(uint64_t timeout_ms);

  int world_size_ = 0;
  int gpus_ = 0;
  int max_blocks_ = 0;
  int programmatic_launch_ = -1;
  uint64_t ticks_per_ms_ = 0;
  std::vector<gpu::DeviceBuffer> buffers_;  // rank r's receive buffer, on device(r)
  std::vector<gpu::DeviceBuffer> state_words_;
  std::vector<gpu::MappedHostBuffer> errors_;  // pinned mapped words
  std::vector<gpu::ScopedStream> streams_;
  gpu::MappedHostBuffer abort_;
  std::map<uint64_t, std::vector<RankState>> states_;  // by timeout_ms
};

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_LOCAL_GROUP_H_
