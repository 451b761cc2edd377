#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/env.h"
#include "common/env_vars.h"
#include "common/status_macros.h"
#include "kernels/geometry.h"
#include "tools/bench_torch.h"
#include "tools/bench_worker_internal.h"

namespace qr::bench::internal {
namespace {

// Sets `name` for the next qr_join (the configuration is read at join).
void SetEnv(const EnvVar& var, int64_t value) {
  ::setenv(std::string(var.name).c_str(), std::to_string(value).c_str(), 1);
}

}  // namespace

Status Worker::SetupGpu() {
  const int gpus = gpu::DeviceCount();
  if (gpus < 1) return UnavailableError("no GPU");
  shared_ = gpus < ws_;
  const StatusOr<bool> allow_shared = kEnvAllowSharedDevice.Bool();
  if (shared_ && !(allow_shared.ok() && *allow_shared)) {
    return UnavailableError(fmt::format(
        "{} ranks need {} GPUs, found {} (fewer are shared only with QR_ALLOW_SHARED_DEVICE=1, "
        "under NVIDIA MPS)",
        ws_, ws_, gpus));
  }
  device_ = rank_ % gpus;
  QR_RETURN_IF_ERROR(gpu::SetDevice(device_));
  QR_ASSIGN_OR_RETURN(stream_, gpu::ScopedStream::Create());
  QR_ASSIGN_OR_RETURN(ev_start_, gpu::ScopedEvent::Create());
  QR_ASSIGN_OR_RETURN(ev_stop_, gpu::ScopedEvent::Create());
  return FillInputs(buffers_, o_.sizes.back(), std::vector<int>{device_});
}

Status Worker::JoinQuickReduce() {
  const std::string base = fmt::format("qr-bench-{}", ::getppid());
  const int64_t max_mib = static_cast<int64_t>((o_.sizes.back() + kBenchMiB - 1) / kBenchMiB);
  auto join = [&](const std::string& group, qr_comm** out) -> Status {
    qr_join_options j{};
    j.group = group.c_str();
    j.rank = rank_;
    j.world_size = ws_;
    j.device = device_;
    if (qr_join(&j, out) != QR_OK) {
      return InternalError(fmt::format("qr_join {}: {}", group, qr_last_error()));
    }
    return OkStatus();
  };
  SetEnv(kEnvMaxSizeMb, std::max<int64_t>(1, max_mib));
  if (o_.two_shot) {
    SetEnv(kEnvOneShotMaxKb, 0);  // every call two-shot
    QR_RETURN_IF_ERROR(join(base + "-2s", &two_shot_));
  }
  if (o_.one_shot) {
    // Every call up to the one-shot region one-shot (the policy's own
    // ceiling is lower at some sizes: the cells name the algorithm).
    SetEnv(kEnvOneShotMaxKb, kernels::OneShotMaxBytes(ws_) / 1024);
    QR_RETURN_IF_ERROR(join(base + "-1s", &one_shot_));
  }
  return OkStatus();
}

Status Worker::StartNccl() {
  QR_RETURN_IF_ERROR(coord_.AllOk(nccl_.Load() && nccl_.GetUniqueId && nccl_.CommInitRank
                                      ? OkStatus()
                                      : UnavailableError("NCCL/RCCL (with ncclCommInitRank) "
                                                         "not found")));
  NcclUniqueId id{};
  std::string hex;
  Status made = OkStatus();
  if (lead()) {
    made = NcclCheck(nccl_, nccl_.GetUniqueId(&id), "ncclGetUniqueId");
    hex = HexEncode(std::string(id.internal, sizeof(id.internal)));
  }
  QR_RETURN_IF_ERROR(coord_.AllOk(made));
  QR_ASSIGN_OR_RETURN(const std::string got, coord_.Broadcast(hex));
  QR_ASSIGN_OR_RETURN(const std::string bytes, HexDecode(got));
  if (bytes.size() != sizeof(id.internal)) return InternalError("NCCL id of the wrong size");
  std::copy(bytes.begin(), bytes.end(), id.internal);
  QR_RETURN_IF_ERROR(coord_.AllOk(
      NcclCheck(nccl_, nccl_.CommInitRank(&comm_, ws_, id, rank_), "ncclCommInitRank")));
  have_nccl_ = true;
  header_.nccl_version = nccl_.Version();
  return OkStatus();
}

// NCCL's symmetric kernels: ncclMemAlloc'd buffers registered as windows
// with NCCL_WIN_COLL_SYMMETRIC (NVIDIA/nccl src/nccl.h.in; the user guide's
// "Window Registration Flags"); the same offsets on every rank, as the flag
// requires: the buffers' heads.
Status Worker::StartNcclSymmetric() {
  const std::string skip = NcclSymmetricSkipReason(
      nccl_.VersionCode(),
      nccl_.MemAlloc && nccl_.MemFree && nccl_.CommWindowRegister && nccl_.CommWindowDeregister);
  if (!skip.empty()) {
    Note("NCCL symmetric baseline " + skip);
    return OkStatus();
  }
  const size_t bytes = o_.sizes.back();
  Status s = NcclCheck(nccl_, nccl_.MemAlloc(&symm_in_, bytes), "ncclMemAlloc");
  if (s.ok()) s = NcclCheck(nccl_, nccl_.MemAlloc(&symm_out_, bytes), "ncclMemAlloc");
  if (s.ok()) s = gpu::Memcpy(symm_in_, buffers_.in[0].get(), bytes);
  QR_RETURN_IF_ERROR(coord_.AllOk(s));
  // Collective: every rank registers the same windows in the same order.
  s = NcclCheck(nccl_,
                nccl_.CommWindowRegister(comm_, symm_in_, bytes, &win_in_, kNcclWinCollSymmetric),
                "ncclCommWindowRegister");
  if (s.ok()) {
    s = NcclCheck(
        nccl_, nccl_.CommWindowRegister(comm_, symm_out_, bytes, &win_out_, kNcclWinCollSymmetric),
        "ncclCommWindowRegister");
  }
  QR_RETURN_IF_ERROR(coord_.AllOk(s));
  have_symm_ = true;
  // NCCL returns success and no window where the communicator has no
  // symmetric support (NVIDIA/nccl src/dev_runtime.cc: "if
  // (!comm->symmetricSupport) return ncclSuccess" with *win null), e.g. at
  // world size 1: the calls then run NCCL's other kernels on these buffers.
  if (win_in_ == nullptr || win_out_ == nullptr) {
    Note(
        "NCCL registered no symmetric window (this communicator has no symmetric support, "
        "e.g. world size 1): the nccl-symm rows are NCCL's other kernels on ncclMemAlloc "
        "buffers");
  }
  return OkStatus();
}

void Worker::LoadTorchRows() {
  if (!lead() || o_.torch_rows_path.empty()) return;
  if (auto err = ReadTextFile(o_.torch_rows_path + ".error"); err.ok()) {
    Fail("torch baseline: " + *err);
    return;
  }
  StatusOr<TorchRows> rows = [&]() -> StatusOr<TorchRows> {
    QR_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(o_.torch_rows_path));
    return ParseTorchCsv(text);
  }();
  output_.AddBaselines(RecordTorchRows(rows, header_));
}

void Worker::Teardown() {
  (void)gpu::StreamSynchronize(stream_.get());
  // Every rank is done with its peers' memory before any frees it.
  (void)coord_.Barrier();
  if (have_symm_) {
    (void)nccl_.CommWindowDeregister(comm_, win_in_);
    (void)nccl_.CommWindowDeregister(comm_, win_out_);
  }
  if (symm_in_ != nullptr) (void)nccl_.MemFree(symm_in_);
  if (symm_out_ != nullptr) (void)nccl_.MemFree(symm_out_);
  if (comm_ != nullptr) (void)nccl_.CommDestroy(comm_);
  for (qr_comm* c : {one_shot_, two_shot_}) (void)qr_leave(c);
  one_shot_ = two_shot_ = nullptr;
}

}  // namespace qr::bench::internal
