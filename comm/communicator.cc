#include "comm/communicator.h"

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/backend.h"
#include "comm/config.h"
#include "comm/fused_call.h"
#include "comm/gpu_backend.h"
#include "comm/host_backend.h"
#include "comm/membership_control.h"
#include "comm/policy.h"
#include "common/limits.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "kernels/platform/platform.h"

namespace qr {

// The one owner of failure. Whatever fails first, a backend call, the
// backend's own failure word (a GPU kernel that gave up after its launch),
// the group (a peer died or aborted) or Abort(), is kept in `sticky` and
// every later call returns it: a collective that failed on one rank may have
// left its peers mid-call, so nothing after it can be trusted. Backends and
// the group report and never decide this.
struct Communicator::Impl {
  JoinOptions options;
  Config config;
  // Declared before backend_: the backend (which polls the group's abort
  // word) must be destroyed first.
  std::unique_ptr<ipc::GroupMembership> group;
  std::unique_ptr<MembershipControl> control;
  std::unique_ptr<Backend> backend;
  Status sticky;  // the first failure
  bool left = false;

  // Keeps the first failure. A timeout that has not stopped the group yet (a
  // GPU kernel's wait ran out; the host backend raises the abort itself)
  // raises its abort, so the peers stop now rather than at their own timeout.
  const Status& Fail(const Status& s) {
    if (!sticky.ok()) return sticky;
    sticky = s;
    if (s.code() == StatusCode::kTimeout && !Aborted()) {
      group->RaiseAbort(s.message()).IgnoreError();
    }
    return sticky;
  }

  bool Aborted() const { return __atomic_load_n(group->abort_word(), __ATOMIC_ACQUIRE) != 0; }

  // The health, read once: the kept failure, else the backend's own, else
  // the abort word. Never blocks, changes nothing. kOk with *aborted set
  // means the group failed and Check() on it says why.
  Status Observe(bool* aborted) const {
    *aborted = false;
    if (!sticky.ok()) return sticky;
    Status s = backend->Failure();
    if (s.ok()) *aborted = Aborted();
    return s;
  }

  // Health for a call (once per call) and for Check(). Every group failure
  // raises the abort word before the broker tells anyone, so a call reads
  // that word and leaves the broker connection (a poll() per call) to
  // Check() and to the moment the word is up.
  Status Health(bool poll_broker) {
    bool aborted = false;
    Status s = Observe(&aborted);
    if (s.ok() && (poll_broker || aborted)) s = group->Check();
    return s.ok() ? s : Fail(s);
  }

  Status Run(const void* in, void* out, size_t count, DType dtype, Regime regime, bool cast,
             bool apply_threshold, void* stream, const ResidualRmsNormArgs* norm = nullptr);
  Status RunResidualRmsNorm(const void* in, void* norm_out, const ResidualRmsNormArgs& norm,
                            DType dtype, Regime regime, bool cast, bool apply_threshold,
                            void* stream);
};

namespace {

StatusOr<std::unique_ptr<Backend>> CreateBackend(const JoinOptions& o, const Config& config,
                                                 std::chrono::milliseconds join_timeout) {
  if (o.device == kDeviceHost) {
    HostBackendOptions host;
    host.op_timeout_ms = config.op_timeout_ms;
    host.join_timeout_ms = join_timeout.count();
    host.one_shot_ceiling_bytes = OneShotCeilingBytes(config, o.world_size);
    return CreateHostBackend(o.rank, o.world_size, host);
  }
  if (o.device < 0) {
    return InvalidArgumentError("device " + std::to_string(o.device) +
                                " is neither a GPU ordinal (>= 0) nor QR_DEVICE_HOST (-1)");
  }
  return CreateGpuBackend(o.device, o.rank, o.world_size, config.op_timeout_ms,
                          join_timeout.count());
}

std::string Address(const void* p) {
  char text[2 + 2 * sizeof(uintptr_t) + 1];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return text;
}

// Checked here, before any backend sees the call, so both backends refuse
// the same pointers and a GPU kernel never runs on them: the kernels load and
// store 16 bytes at a time (a misaligned address faults the GPU, and the
// fault kills the context), and a partial overlap would have ranks read
// input that their own output already overwrote.
Status CheckPointers(const void* in, const void* out, size_t bytes) {
  for (const auto& [name, p] : {std::pair<const char*, const void*>{"in", in}, {"out", out}}) {
    if (reinterpret_cast<uintptr_t>(p) % kMessageAlignBytes != 0) {
      return InvalidArgumentError(std::string("all_reduce: ") + name + " (" + Address(p) +
                                  ") is not 16-byte aligned (a view that starts inside an "
                                  "allocation, at element 1 say, is not)");
    }
  }
  const uintptr_t x = reinterpret_cast<uintptr_t>(in);
  const uintptr_t y = reinterpret_cast<uintptr_t>(out);
  // Overflow-free form of "the ranges [x, x+bytes) and [y, y+bytes) meet".
  const bool overlap = x < y ? y - x < bytes : x - y < bytes;
  if (in != out && overlap) {
    return InvalidArgumentError("all_reduce: in (" + Address(in) + ") and out (" + Address(out) +
                                ") overlap without being equal (" + std::to_string(bytes) +
                                " bytes each; pass in == out for in place)");
  }
  return OkStatus();
}

// Every member published its one-shot ceiling (JoinParams::agreed); every
// member runs this check on the same slots, so all of them refuse together.
Status CheckOneShotCeilings(const std::vector<ipc::MemberInfo>& members, uint64_t mine,
                            int my_rank) {
  for (const ipc::MemberInfo& m : members) {
    if (m.agreed == mine) continue;
    return InvalidArgumentError(
        "rank " + std::to_string(m.rank) + " runs one-shot up to " + std::to_string(m.agreed) +
        " bytes and rank " + std::to_string(my_rank) + " up to " + std::to_string(mine) +
        ": QR_ONE_SHOT_MAX_KB must be the same on every rank (unset everywhere for the "
        "built-in ceiling)");
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Communicator>> Communicator::Join(const JoinOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  QR_RETURN_IF_ERROR(ipc::ValidateName("group", options.group));
  QR_RETURN_IF_ERROR(ValidateWorldSize(options.world_size));
  if (options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgumentError("rank " + std::to_string(options.rank) + " is outside [0, " +
                                std::to_string(options.world_size) + ")");
  }
  // The library's logger reads QR_LOG_LEVEL once; a bad value is an error
  // here like every other setting, not silently ignored.
  QR_RETURN_IF_ERROR(LogLevelFromEnv().status());
  // The defaults follow the backend the group actually runs.
  const Platform platform = options.device == kDeviceHost ? Platform::kHost : GpuPlatform();
  QR_ASSIGN_OR_RETURN(impl->config, LoadConfigFromEnv(platform));
  QR_ASSIGN_OR_RETURN(const int64_t join_timeout_ms, JoinTimeoutMs(options.timeout_ms));
  const std::chrono::milliseconds join_timeout(join_timeout_ms);
  QR_ASSIGN_OR_RETURN(impl->backend, CreateBackend(options, impl->config, join_timeout));

  ipc::JoinParams p;
  p.socket_path = options.broker_socket;
  p.group = options.group;
  p.rank = options.rank;
  p.world_size = options.world_size;
  p.device_id = impl->backend->device_id();
  p.buffer_bytes = impl->backend->buffer_bytes();
  p.agreed = OneShotCeilingBytes(impl->config, options.world_size);
  p.timeout = join_timeout;
  p.allow_shared_device = impl->config.allow_shared_device;
  QR_ASSIGN_OR_RETURN(p.autostart, ipc::AutostartFromEnv());
  QR_ASSIGN_OR_RETURN(impl->group, ipc::GroupMembership::Join(p));

  impl->control = std::make_unique<MembershipControl>(*impl->group);
  const std::string where = "group " + options.group + " rank " + std::to_string(options.rank);
  Status s = impl->backend->Allocate(*impl->control);
  if (!s.ok()) {
    // The peers would wait out their join timeout for a rank that "never
    // joined": fail the group now, saying why.
    impl->group->RaiseAbort(where + " could not allocate its buffers: " + s.message())
        .IgnoreError();
  }
  if (s.ok())
    s = impl->group->PublishAndWaitReady(impl->backend->blob_kind(), impl->backend->blob());
  if (s.ok()) s = CheckOneShotCeilings(impl->group->Members(), p.agreed, options.rank);
  if (s.ok()) {
    s = impl->backend->Connect(PeerBuffersOf(impl->group->Members()), *impl->control);
    if (!s.ok()) {
      // The peers are READY and about to wait on our flags: stop them now.
      impl->group->RaiseAbort(where + " could not map its peers: " + s.message()).IgnoreError();
    }
  }
  if (!s.ok()) {
    impl->backend.reset();
    impl->group->Leave().IgnoreError();
    return s.WithContext("joining " + where);
  }
  // One line per join at info, as NCCL's "Init COMPLETE": what this rank runs.
  Log().info(
      "quickreduce {} joined {} of world size {}: backend {}, platform {}, device {}, regime {}, "
      "one-shot up to {} KiB (generation {}, segment {})",
      kVersion, where, options.world_size, platform == Platform::kHost ? "host" : "gpu",
      PlatformName(platform), impl->backend->device_id(), RegimeName(impl->config.regime),
      p.agreed / 1024, impl->group->generation(), impl->group->segment_name());
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() {
  Status s = Leave();
  if (!s.ok()) Log().warn("leaving group {}: {}", impl_->options.group, s.ToString());
}

int Communicator::rank() const { return impl_->options.rank; }
int Communicator::world_size() const { return impl_->options.world_size; }
int Communicator::device() const { return impl_->options.device; }
const Config& Communicator::config() const { return impl_->config; }
uint64_t Communicator::generation() const { return impl_->left ? 0 : impl_->group->generation(); }

bool Communicator::ShouldAllReduce(size_t bytes, DType dtype) const {
  return qr::ShouldAllReduce(impl_->config, bytes, dtype, impl_->options.world_size);
}

bool Communicator::ShouldAllReduce(size_t bytes, DType dtype, Regime regime,
                                   bool cast_bf16_to_fp16) const {
  Config forced = impl_->config;
  forced.regime = regime;
  forced.cast_bf16_to_fp16 = cast_bf16_to_fp16;
  return qr::ShouldAllReduce(forced, bytes, dtype, impl_->options.world_size);
}

Status Communicator::AllReduce(const void* in, void* out, size_t count, DType dtype, void* stream) {
  return impl_->Run(in, out, count, dtype, impl_->config.regime, impl_->config.cast_bf16_to_fp16,
                    /*apply_threshold=*/true, stream);
}

Status Communicator::AllReduce(const void* in, void* out, size_t count, DType dtype, Regime regime,
                               bool cast_bf16_to_fp16, void* stream) {
  return impl_->Run(in, out, count, dtype, regime, cast_bf16_to_fp16,
                    /*apply_threshold=*/false, stream);
}

Status Communicator::AllReduceResidualRmsNorm(const void* in, const void* residual,
                                              const void* weight, void* residual_out,
                                              void* norm_out, size_t tokens, size_t hidden,
                                              float eps, DType dtype, Regime regime,
                                              bool cast_bf16_to_fp16, void* stream) {
  return AllReduceResidualRmsNormFp8(in, residual, weight, residual_out, norm_out, nullptr, nullptr,
                                     tokens, hidden, eps, dtype, regime, cast_bf16_to_fp16, stream);
}

Status Communicator::AllReduceResidualRmsNorm(const void* in, const void* residual,
                                              const void* weight, void* residual_out,
                                              void* norm_out, size_t tokens, size_t hidden,
                                              float eps, DType dtype, void* stream) {
  return AllReduceResidualRmsNormFp8(in, residual, weight, residual_out, norm_out, nullptr, nullptr,
                                     tokens, hidden, eps, dtype, stream);
}

Status Communicator::AllReduceResidualRmsNormFp8(const void* in, const void* residual,
                                                 const void* weight, void* residual_out,
                                                 void* norm_out, void* quant_out,
                                                 const float* scale, size_t tokens, size_t hidden,
                                                 float eps, DType dtype, Regime regime,
                                                 bool cast_bf16_to_fp16, void* stream) {
  return impl_->RunResidualRmsNorm(
      in, norm_out, {residual, weight, residual_out, tokens, hidden, eps, quant_out, scale}, dtype,
      regime, cast_bf16_to_fp16, /*apply_threshold=*/false, stream);
}

Status Communicator::AllReduceResidualRmsNormFp8(const void* in, const void* residual,
                                                 const void* weight, void* residual_out,
                                                 void* norm_out, void* quant_out,
                                                 const float* scale, size_t tokens, size_t hidden,
                                                 float eps, DType dtype, void* stream) {
  return impl_->RunResidualRmsNorm(
      in, norm_out, {residual, weight, residual_out, tokens, hidden, eps, quant_out, scale}, dtype,
      impl_->config.regime, impl_->config.cast_bf16_to_fp16, /*apply_threshold=*/true, stream);
}

// The fused request's own checks come first, so a bad call fails before
// anything runs on every backend; then it is an all-reduce into norm_out.
Status Communicator::Impl::RunResidualRmsNorm(const void* in, void* norm_out,
                                              const ResidualRmsNormArgs& norm, DType dtype,
                                              Regime regime, bool cast, bool apply_threshold,
                                              void* stream) {
  if (left) return InvalidArgumentError("all_reduce_residual_rmsnorm: the communicator has left");
  QR_RETURN_IF_ERROR(
      CheckResidualRmsNormArgs(in, norm_out, norm, static_cast<uint64_t>(config.max_size_bytes)));
  return Run(in, norm_out, norm.tokens * norm.hidden, dtype, regime, cast, apply_threshold, stream,
             &norm);
}

Status Communicator::Impl::Run(const void* in, void* out, size_t count, DType dtype, Regime regime,
                               bool cast, bool apply_threshold, void* stream,
                               const ResidualRmsNormArgs* norm) {
  if (left) return InvalidArgumentError("all_reduce: the communicator has left its group");
  // DESIGN.md: count == 0 is a no-op returning OK, whatever the regime.
  if (count == 0) return OkStatus();
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return InvalidArgumentError("all_reduce: dtype must be fp16 or bf16");
  }
  if (regime == Regime::kNone) {
    return UnsupportedError(
        "all_reduce: regime NONE declines quick-reduce (QR_QUANTIZATION=NONE disables it: unset "
        "it for FP or set INT8, INT6, INT4 or INT3, or call qr_all_reduce_ex with a regime)");
  }
  if (!CodecRunsAtWorldSize(CodecForRegime(regime), options.world_size)) {
    return UnsupportedError("all_reduce: INT3 needs world size 2, this group has " +
                            std::to_string(options.world_size));
  }
  if (in == nullptr || out == nullptr) {
    return InvalidArgumentError(std::string("all_reduce: ") + (in == nullptr ? "in" : "out") +
                                " is NULL");
  }
  constexpr size_t kElemBytes = 2;
  if (count > std::numeric_limits<size_t>::max() / kElemBytes) {
    return InvalidArgumentError("all_reduce: count " + std::to_string(count) + " overflows");
  }
  const size_t bytes = count * kElemBytes;
  if (!IsWholeMessageUnits(bytes)) {
    return InvalidArgumentError("all_reduce: message of " + std::to_string(bytes) +
                                " bytes is not a multiple of 16 bytes");
  }
  if (bytes > static_cast<uint64_t>(config.max_size_bytes)) {
    return InvalidArgumentError(
        "all_reduce: message of " + std::to_string(bytes) + " bytes exceeds the maximum of " +
        std::to_string(config.max_size_bytes) + " bytes (QR_MAX_SIZE_BYTES_MB)");
  }
  QR_RETURN_IF_ERROR(CheckPointers(in, out, bytes));
  QR_RETURN_IF_ERROR(Health(/*poll_broker=*/false));

  AllReduceCall call;
  call.in = in;
  call.out = out;
  call.count = count;
  call.dtype = dtype;
  call.codec = apply_threshold ? EffectiveCodec(config, regime, bytes) : CodecForRegime(regime);
  call.cast_bf16_to_fp16 = cast && dtype == DType::kBFloat16;
  call.stream = stream;
  // The same function on every rank and backend (DESIGN.md): same call, same
  // algorithm, same bits.
  call.algorithm = ChooseAlgorithm(config, bytes, options.world_size,
                                   WorkFormatOf(dtype, call.cast_bf16_to_fp16), call.codec);
  if (norm != nullptr) {
    call.collective = Collective::kAllReduceResidualRmsNorm;
    call.norm = *norm;
  }
  Status s = backend->AllReduce(call);
  if (!s.ok()) return Fail(s);
  // Two-shot calls count under their codec; one-shot calls, which move exact
  // values whatever codec they name, under one-shot.
  group->CountOp(
      call.algorithm == Algorithm::kOneShot ? ipc::kOneShotCounter : static_cast<int>(call.codec),
      bytes);
  return OkStatus();
}

Status Communicator::Submit(const AllReduceCall& call, uint64_t bytes) {
  if (impl_->left) return InvalidArgumentError("the communicator has left its group");
  QR_RETURN_IF_ERROR(impl_->Health(/*poll_broker=*/false));
  Status s = impl_->backend->AllReduce(call);
  if (!s.ok()) return impl_->Fail(s);
  impl_->group->CountOp(
      call.algorithm == Algorithm::kOneShot ? ipc::kOneShotCounter : static_cast<int>(call.codec),
      bytes);
  return OkStatus();
}

Status Communicator::Check() {
  if (impl_->left) return InvalidArgumentError("check: the communicator has left its group");
  return impl_->Health(/*poll_broker=*/true);
}

Status Communicator::Abort(std::string_view reason) {
  if (impl_->left) return InvalidArgumentError("abort: the communicator has left its group");
  QR_RETURN_IF_ERROR(impl_->group->RaiseAbort(reason));
  impl_
      ->Fail(PeerFailedError("rank " + std::to_string(impl_->options.rank) +
                             " aborted the group: " + std::string(reason)))
      .IgnoreError();
  return OkStatus();
}

Status Communicator::Leave() {
  if (impl_->left) return OkStatus();
  impl_->left = true;
  impl_->backend.reset();  // unmaps peers, unlinks our own buffers
  impl_->control.reset();
  Status s = impl_->group->Leave();
  impl_->group.reset();
  return s;
}

}  // namespace qr
