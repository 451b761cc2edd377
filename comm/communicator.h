// Communicator: the C++ API of the quickreduce client library.
//
// One Communicator is one rank's membership in a group plus its data path
// (host backend over POSIX shared memory, or a GPU backend). The C ABI in
// comm/quickreduce.h is a thin layer over this class.
//
//   JoinOptions o;
//   o.group = "tp0"; o.rank = rank; o.world_size = 2; o.device = kDeviceHost;
//   QR_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> c, Communicator::Join(o));
//   QR_RETURN_IF_ERROR(c->AllReduce(in, out, n, DType::kFloat16));
//   QR_RETURN_IF_ERROR(c->Leave());
//
// Thread-compatible: one communicator must not be used by two threads at
// once; distinct communicators are independent (also within one process).
#ifndef QR_COMM_COMMUNICATOR_H_
#define QR_COMM_COMMUNICATOR_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "comm/config.h"
#include "common/status.h"
#include "kernels/types.h"

namespace qr {

inline constexpr int kDeviceHost = -1;
struct AllReduceCall;  // comm/backend.h

struct JoinOptions {
  std::string broker_socket;  // empty: $QR_BROKER_SOCKET or the default
  std::string group;          // [A-Za-z0-9._-]{1,63}
  int rank = -1;
  int world_size = 0;        // 2, 4 or 8
  int device = kDeviceHost;  // GPU ordinal, or kDeviceHost
  int timeout_ms = 0;        // join timeout; <= 0: $QR_JOIN_TIMEOUT_MS or 60000
};

class Communicator {
 public:
  // Loads the configuration from the environment, joins the group through
  // the broker, allocates and publishes this rank's buffers and waits until
  // every rank has mapped everyone's. The returned object owns all of it.
  // Errors: kInvalidArgument (options or environment), kUnavailable (no
  // broker, or no such GPU), kTimeout (naming missing ranks), kAlreadyExists
  // (rank taken, GPU already in the group), kPeerFailed, kInternal.
  [[nodiscard]] static StatusOr<std::unique_ptr<Communicator>> Join(const JoinOptions& options);

  ~Communicator();  // Leave()s if not done yet; errors are logged
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int world_size() const;
  int device() const;
  const Config& config() const;
  uint64_t generation() const;

  // The policy for the configured regime (comm/policy.h): a pure function of
  // the message and the configuration, never of the group's health (ranks
  // that answered differently after a failure would route one call to
  // different backends); a failed group makes AllReduce itself fail.
  bool ShouldAllReduce(size_t bytes, DType dtype) const;
  // The same rule for `regime` and cast (the bf16 min-size row) in place of
  // the configured ones: what the forced-regime AllReduce is eligible for.
  bool ShouldAllReduce(size_t bytes, DType dtype, Regime regime, bool cast_bf16_to_fp16) const;

  // All-reduce with the configured regime; FP below the quantization
  // threshold. kUnsupported when the configured regime is NONE. Both
  // overloads run one-shot (exact, the regime's codec unused) when
  // ChooseAlgorithm (comm/policy.h) says so: up to QR_ONE_SHOT_MAX_KB, by
  // default a few hundred KiB depending on the world size.
  [[nodiscard]] Status AllReduce(const void* in, void* out, size_t count, DType dtype,
                                 void* stream = nullptr);
  // All-reduce with `regime` forced (NONE is kUnsupported, INT3 needs world
  // size 2). Errors of both: kInvalidArgument (null pointers, pointers
  // not 16-byte aligned, size not a multiple of 16 bytes or above the
  // maximum, partially overlapping in/out: before any backend runs, on every
  // backend, with the addresses in the message),
  // kUnsupported, kPeerFailed, kTimeout, kInternal. Data-path errors are sticky.
  [[nodiscard]] Status AllReduce(const void* in, void* out, size_t count, DType dtype,
                                 Regime regime, bool cast_bf16_to_fp16, void* stream = nullptr);

  // The all-reduce of `in` (exactly AllReduce's bits for the same count,
  // dtype, regime and cast), then residual_out = that + residual and
  // norm_out = RMSNorm(residual_out) * weight per row of `hidden` values
  // (docs/fused.md; residual may be null). residual_out may equal in or
  // residual, norm_out may equal in. Eligible when ShouldAllReduce(tokens *
  // hidden * 2, dtype, ...) is. Errors: AllReduce's, plus kInvalidArgument
  // (before anything runs) for hidden not a multiple of 8, a null or
  // misaligned buffer, or any other overlap. Host: synchronous.
  [[nodiscard]] Status AllReduceResidualRmsNorm(const void* in, const void* residual,
                                                const void* weight, void* residual_out,
                                                void* norm_out, size_t tokens, size_t hidden,
                                                float eps, DType dtype, Regime regime,
                                                bool cast_bf16_to_fp16, void* stream = nullptr);
  // The same with the configured regime, cast and FP threshold, as AllReduce.
  [[nodiscard]] Status AllReduceResidualRmsNorm(const void* in, const void* residual,
                                                const void* weight, void* residual_out,
                                                void* norm_out, size_t tokens, size_t hidden,
                                                float eps, DType dtype, void* stream = nullptr);
  // AllReduceResidualRmsNorm, and norm_out quantized to FP8 e4m3 for the
  // next GEMM (qr_all_reduce_residual_rmsnorm_fp8, docs/fused.md "FP8
  // output"): quant_out = e4m3(norm_out * (1 / *scale)), tokens x hidden
  // bytes; scale one fp32 in the backend's memory (device memory on a GPU,
  // read when the kernel runs). Both disjoint from every other buffer.
  [[nodiscard]] Status AllReduceResidualRmsNormFp8(const void* in, const void* residual,
                                                   const void* weight, void* residual_out,
                                                   void* norm_out, void* quant_out,
                                                   const float* scale, size_t tokens, size_t hidden,
                                                   float eps, DType dtype, Regime regime,
                                                   bool cast_bf16_to_fp16, void* stream = nullptr);
  // The same with the configured regime, cast and FP threshold.
  [[nodiscard]] Status AllReduceResidualRmsNormFp8(const void* in, const void* residual,
                                                   const void* weight, void* residual_out,
                                                   void* norm_out, void* quant_out,
                                                   const float* scale, size_t tokens, size_t hidden,
                                                   float eps, DType dtype, void* stream = nullptr);
  // Reduce-scatter (comm/collectives.cc, docs/collectives.md): `in` holds
  // world_size * recvcount values, `out` gets rank()'s recvcount values
  // [rank * recvcount, (rank + 1) * recvcount) of the sum: the two-shot's
  // phase 1 with `regime`'s codec (exact below the one-shot ceiling). In
  // place: out == in + rank * recvcount.
  // All-gather: `in` holds sendcount values, `out` gets world_size *
  // sendcount, rank q's at [q * sendcount, ...). FP copies bits exactly;
  // another regime quantizes each value once (lossy, docs/collectives.md). In
  // place: in == out + rank * sendcount.
  // Both: count 0 is a no-op; shards must be 16-byte multiples and the whole
  // message (world_size * count values) at most the maximum; in and out
  // 16-byte aligned, disjoint unless in place. Errors as AllReduce's, checked
  // before anything runs. Every rank must make the same calls.
  [[nodiscard]] Status ReduceScatter(const void* in, void* out, size_t recvcount, DType dtype,
                                     Regime regime, bool cast_bf16_to_fp16, void* stream = nullptr);
  [[nodiscard]] Status AllGather(const void* in, void* out, size_t sendcount, DType dtype,
                                 Regime regime, bool cast_bf16_to_fp16, void* stream = nullptr);

  // Never blocks: OK while healthy, else the sticky kPeerFailed / kTimeout.
  [[nodiscard]] Status Check();

  // Fails the whole group now: raises its abort word (every peer's waits and
  // kernels give up, their next call or Check returns kPeerFailed naming this
  // rank and `reason`) and tells the broker, which marks the group FAILED.
  // For a rank that hit a fatal error of its own; without it peers would wait
  // out QR_OP_TIMEOUT_MS. This communicator's own state becomes kPeerFailed.
  // kInvalidArgument after Leave.
  [[nodiscard]] Status Abort(std::string_view reason);

  // Frees the data path (unlinking what this rank created) and leaves the
  // group. Idempotent. Returns the broker's error, if any; frees regardless.
  [[nodiscard]] Status Leave();

 private:
  // Runs a call validated by the caller (comm/collectives.cc) on the
  // backend, with the same health check, sticky failure and op counting as
  // AllReduce; `bytes` is what the op counters add.
  [[nodiscard]] Status Submit(const AllReduceCall& call, uint64_t bytes);

  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qr

#endif  // QR_COMM_COMMUNICATOR_H_
