/* quickreduce C ABI: join a group of independent processes, all-reduce, leave.
 *
 * This header is a fixed contract (names, enum values, semantics). It is C
 * and C++ compatible and includes nothing beyond <stddef.h>.
 *
 *   qr_join_options o = {NULL, "tp0", rank, 2, QR_DEVICE_HOST, 0};
 *   qr_comm* c;
 *   if (qr_join(&o, &c) != QR_OK) fprintf(stderr, "%s\n", qr_last_error());
 *   qr_all_reduce_ex(c, in, out, n, QR_FLOAT16, QR_REGIME_INT8, 1, NULL);
 *   qr_leave(c);
 *
 * Thread-compatibility: each function may be called from any thread, but one
 * communicator must not be used by two threads at once. Different
 * communicators (also in one process) are independent. qr_last_error() is
 * per thread and describes the last failing call of this thread.
 *
 * Host backend (device == QR_DEVICE_HOST): in/out are host pointers, stream is
 * ignored and calls are synchronous. GPU backend: in/out are device pointers,
 * the call is enqueued on stream (a hipStream_t/cudaStream_t, NULL = default);
 * a failure inside the kernel (peer died, wait timed out) is reported by the
 * next qr_check or qr_all_reduce.
 */
#ifndef QR_COMM_QUICKREDUCE_H_
#define QR_COMM_QUICKREDUCE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qr_comm qr_comm;

typedef enum {
  QR_OK = 0,
  QR_INVALID_ARGUMENT = 1, /* bad pointer, size, name, rank, dtype, regime */
  QR_UNAVAILABLE = 2,      /* no broker and none could be started */
  QR_TIMEOUT = 3,          /* join or a data-path wait ran out */
  QR_PEER_FAILED = 4,      /* a member died or the group was aborted */
  QR_UNSUPPORTED = 5,      /* valid request this build/device cannot serve */
  QR_ALREADY_EXISTS = 6,   /* rank taken, device used twice in the group
                              (unless every rank sets QR_ALLOW_SHARED_DEVICE=1) */
  QR_INTERNAL = 7
} qr_status;

typedef enum { QR_FLOAT16 = 0, QR_BFLOAT16 = 1 } qr_dtype;

typedef enum {
  QR_REGIME_FP = 0,
  QR_REGIME_INT8 = 1,
  QR_REGIME_INT6 = 2,
  QR_REGIME_INT4 = 3,
  QR_REGIME_INT3 = 4, /* world size 2 only */
  QR_REGIME_NONE = 5  /* quick-reduce declines: qr_should_all_reduce is 0 */
} qr_regime;

#define QR_DEVICE_HOST (-1)

typedef struct {
  const char* broker_socket; /* NULL: $QR_BROKER_SOCKET or the default */
  const char* group;         /* [A-Za-z0-9._-]{1,63} */
  int rank, world_size;      /* 0 <= rank < world_size; world_size 2, 4 or 8 */
  int device;                /* GPU ordinal in this process, or QR_DEVICE_HOST */
  int timeout_ms;            /* join timeout; <= 0: $QR_JOIN_TIMEOUT_MS or 60000 */
} qr_join_options;

/* Joins (creating on first join) the group opts->group as opts->rank and
 * blocks until all world_size ranks have joined and mapped each other's
 * buffers. Reads the configuration from the environment (invalid values are
 * QR_INVALID_ARGUMENT naming the variable). On success *out owns the
 * communicator until qr_leave. On failure *out is set to NULL.
 * Returns QR_OK, QR_INVALID_ARGUMENT, QR_UNAVAILABLE, QR_TIMEOUT (naming the
 * missing ranks), QR_ALREADY_EXISTS, QR_UNSUPPORTED, QR_PEER_FAILED. */
qr_status qr_join(const qr_join_options* opts, qr_comm** out);

/* 1 when qr_all_reduce would run quick-reduce for a message of `bytes` bytes
 * of `dtype` under the configured regime (not NONE, bytes % 16 == 0,
 * min <= bytes <= max), else 0. c == NULL gives 0. A pure function of the
 * message and the configuration, never of the group's health: after a peer
 * dies every rank still answers the same, so no two ranks route one call to
 * different backends (the rank on the other backend would hang); the call
 * itself then fails with QR_PEER_FAILED / QR_TIMEOUT. */
int qr_should_all_reduce(const qr_comm* c, size_t bytes, qr_dtype dtype);

/* Sums `count` elements of `dtype` across the group into out (in == out
 * allowed) with the configured regime; FP below the quantization threshold
 * (QR_QUANTIZATION_MIN_SIZE_KB). count == 0 is a no-op. The message must be a
 * multiple of 16 bytes and at most QR_MAX_SIZE_BYTES_MB; in and out must be
 * 16-byte aligned and either equal or disjoint (else QR_INVALID_ARGUMENT
 * naming the addresses, before anything runs). Every rank must make
 * the same sequence of calls with the same count, dtype and regime.
 * Returns QR_OK, QR_INVALID_ARGUMENT, QR_UNSUPPORTED (regime NONE, INT3 with
 * world size != 2), QR_PEER_FAILED, QR_TIMEOUT, QR_INTERNAL. */
qr_status qr_all_reduce(qr_comm* c, const void* in, void* out, size_t count, qr_dtype dtype,
                        void* stream);

/* As qr_all_reduce with the regime forced (QR_REGIME_NONE is QR_UNSUPPORTED)
 * and the bf16 cast chosen by cast_bf16_to_fp16 (0 or not). The regime is
 * used as given, with no fallback to FP for small messages. */
qr_status qr_all_reduce_ex(qr_comm* c, const void* in, void* out, size_t count, qr_dtype dtype,
                           qr_regime regime, int cast_bf16_to_fp16, void* stream);

/* Reduce-scatter (counts per rank, as ncclReduceScatter): in holds
 * world_size * recvcount elements; out gets recvcount elements, this rank's
 * shard [rank * recvcount, (rank + 1) * recvcount) of the sum, as the
 * two-shot's phase 1 computes it with `regime`'s codec (no second
 * quantization; exact FP sums below the one-shot ceiling). In place: out ==
 * in + rank * recvcount. recvcount == 0 is a no-op. Errors as
 * qr_all_reduce_ex's; the shard (recvcount * 2 bytes) must be a multiple of
 * 16 bytes, the whole message (world_size * recvcount elements) at most
 * QR_MAX_SIZE_BYTES_MB, in and out 16-byte aligned and disjoint unless in
 * place (else QR_INVALID_ARGUMENT before anything runs). GPU communicators:
 * QR_UNSUPPORTED in this version. */
qr_status qr_reduce_scatter_ex(qr_comm* c, const void* in, void* out, size_t recvcount,
                               qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                               void* stream);

/* All-gather (as ncclAllGather): in holds sendcount elements; out gets
 * world_size * sendcount, rank q's at [q * sendcount, (q + 1) * sendcount).
 * QR_REGIME_FP copies bits exactly (cast_bf16_to_fp16 ignored); another
 * regime quantizes each value once and is lossy within the bound of
 * docs/collectives.md. In place: in == out + rank * sendcount. Otherwise as
 * qr_reduce_scatter_ex. */
qr_status qr_all_gather_ex(qr_comm* c, const void* in, void* out, size_t sendcount, qr_dtype dtype,
                           qr_regime regime, int cast_bf16_to_fp16, void* stream);

/* Never blocks: QR_OK while healthy, else QR_PEER_FAILED / QR_TIMEOUT
 * (sticky once seen). c == NULL is QR_INVALID_ARGUMENT. */
qr_status qr_check(qr_comm* c);

/* Leaves the group and frees c and everything this rank created (shared
 * memory included), whatever the group's state. c == NULL is a no-op that
 * returns QR_OK. Returns QR_OK, or the error met while telling the broker
 * (resources are freed either way). */
qr_status qr_leave(qr_comm* c);

/* This thread's last error text ("" when none); valid until this thread's
 * next qr_* call. */
const char* qr_last_error(void);

/* "QR_OK", "QR_INVALID_ARGUMENT", ...; "QR_UNKNOWN" for other values. */
const char* qr_status_name(qr_status s);

/* Additions beyond the fixed contract. */

/* Fails the whole group at once, for a rank that hit a fatal error of its
 * own: every peer's pending and later calls return QR_PEER_FAILED (their
 * kernels and waits give up) with `reason` (may be NULL) in qr_last_error,
 * and qrctl shows the group FAILED. Peers need not wait out QR_OP_TIMEOUT_MS.
 * c stays valid and must still be freed with qr_leave.
 * Returns QR_OK, or QR_INVALID_ARGUMENT for c == NULL. */
qr_status qr_abort(qr_comm* c, const char* reason);

/* The communicator's rank / world size; -1 for c == NULL. */
int qr_comm_rank(const qr_comm* c);
int qr_comm_world_size(const qr_comm* c);

/* --- Introspection and the host reference (for the Python package and other
 * FFI users). Additions beyond the fixed contract. --- */

/* The library's version ("MAJOR.MINOR.PATCH"); static storage. */
const char* qr_version(void);

/* The effective configuration as one JSON object: c's (read at its join), or,
 * for c == NULL, the environment's now as the host backend reads it. Keys:
 * version, platform ("host", "NVIDIA", "AMD"), regime ("FP".."NONE"),
 * cast_bf16_to_fp16, max_size_bytes, min_size_bytes_override,
 * quantization_min_size_bytes, one_shot_max_bytes (null when unset),
 * op_timeout_ms, allow_shared_device, and per world size ("2", "4", "8"; only c's with c) the
 * derived one_shot_ceiling_bytes, min_size_bytes {"fp16", "bf16"} (null:
 * never eligible) and shm_bytes {"host", "gpu"} (what a group of that size
 * puts in /dev/shm, all ranks together: the group segment, plus every rank's
 * data object on the host backend). Valid until this thread's next qr_* call. NULL on an
 * invalid environment (the reason in qr_last_error). */
const char* qr_config_json(const qr_comm* c);

/* The GPUs this process sees and what the join's topology check makes of
 * them, as JSON: platform, runtime_version and driver_version (CUDA's
 * 1000 * major + 10 * minor, or HIP's; 0 when unknown / no driver), devices
 * [{ordinal, pci_bus_id}], peer_access[i][j] (true, false, or null where
 * neither the runtime nor NVML could tell) and peer_access_source[i][j]
 * ("runtime", "nvml", ""). No group is needed. Valid until this thread's
 * next qr_* call; NULL on an internal error (the reason in qr_last_error). */
const char* qr_devices_json(void);

/* qr_should_all_reduce's rule for `regime` and `cast_bf16_to_fp16` (0 or not;
 * it picks the bf16 min-size row) instead of the configured ones: what
 * qr_all_reduce_ex(c, ..., regime, cast, ...) would be eligible for. 0 for
 * c == NULL or values out of range. */
int qr_should_all_reduce_ex(const qr_comm* c, size_t bytes, qr_dtype dtype, qr_regime regime,
                            int cast_bf16_to_fp16);

/* As a regime argument of the reference functions below: the configured
 * regime, cast and FP threshold, as qr_all_reduce applies them. */
#define QR_REGIME_CONFIGURED ((qr_regime)-1)

/* The library's host reference of exactly the call a group of `world_size`
 * ranks would run for qr_all_reduce_ex(..., count, dtype, regime,
 * cast_bf16_to_fp16, ...) (or qr_all_reduce for QR_REGIME_CONFIGURED): the
 * same validation, one-shot or two-shot by the same policy, the same codec,
 * with the configuration read from the environment now as the host backend
 * reads it (the same bits as a GPU group on NVIDIA; on AMD, whose default
 * casts bf16 to fp16, pass the cast explicitly). inputs[r] holds
 * rank r's count values; the result (the same bits on every rank) goes to
 * output, which may equal an input. Synchronous, allocates world_size * count
 * values of scratch. Returns qr_all_reduce_ex's argument errors
 * (QR_INVALID_ARGUMENT, QR_UNSUPPORTED). */
qr_status qr_reference_all_reduce(const void* const* inputs, int world_size, size_t count,
                                  qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                                  void* output);

/* Checks `output` of that call against the documented per-element error bound
 * of the algorithm and codec the call runs with (docs/codecs.md): writes the
 * largest |error| / bound to *max_ratio (<= 1 within the bound) and the
 * number of elements above the bound to *violations (elements of blocks that
 * hold inf/NaN are skipped). Same arguments and errors as
 * qr_reference_all_reduce; max_ratio and violations must not be NULL. */
qr_status qr_reference_check_bound(const void* const* inputs, int world_size, size_t count,
                                   qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                                   const void* output, double* max_ratio, size_t* violations);

/* The documented per-element error bound (docs/codecs.md) of the two-shot
 * path with `regime`'s codec (and the cast for bf16 when cast_bf16_to_fp16),
 * for these inputs: bounds[i] bounds |output[i] - exact sum of inputs[r][i]|.
 * Regime FP with the cast off is also the one-shot path's bound. No
 * configuration is read and no policy applies: the caller names the codec
 * (QR_REGIME_CONFIGURED and NONE are QR_INVALID_ARGUMENT). Elements of blocks
 * of 32 that hold inf/NaN in some rank get NaN (they have no bound). bounds
 * holds count doubles. Returns QR_INVALID_ARGUMENT (world size, dtype,
 * regime, NULL pointers), QR_UNSUPPORTED (INT3 at a world size other than 2). */
qr_status qr_reference_error_bounds(const void* const* inputs, int world_size, size_t count,
                                    qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                                    double* bounds);

/* --- Fused collectives (docs/fused.md). --- */

/* The all-reduce of `in` ([tokens, hidden] of dtype: exactly
 * qr_all_reduce_ex's bits for tokens * hidden values with the same regime
 * and cast), then per token row, in fp32:
 *   residual_out = all_reduce(in) + residual, rounded to dtype (residual may
 *                  be NULL: residual_out = all_reduce(in));
 *   norm_out     = residual_out * (1 / sqrt(mean(residual_out^2) + eps)) * weight
 * with weight [hidden] in dtype; the sum of squares in a fixed order, the
 * square root and division correctly rounded, so every rank and backend
 * produce the same bits (the host reference is the specification).
 * residual_out may equal in or residual; norm_out may equal in. Any other
 * overlap, a NULL in/weight/residual_out/norm_out, a pointer not 16-byte
 * aligned, hidden not a multiple of 8 (rows of 16 bytes) or a message above
 * QR_MAX_SIZE_BYTES_MB is QR_INVALID_ARGUMENT before anything runs.
 * tokens == 0 is a no-op. regime as in qr_all_reduce_ex, or
 * QR_REGIME_CONFIGURED for the configured regime, cast and FP threshold (as
 * qr_all_reduce; cast_bf16_to_fp16 is then ignored). Eligible when
 * qr_should_all_reduce(_ex) is for tokens * hidden * 2 bytes. Returns
 * qr_all_reduce_ex's statuses. */
qr_status qr_all_reduce_residual_rmsnorm(qr_comm* c, const void* in, const void* residual,
                                         const void* weight, void* residual_out, void* norm_out,
                                         size_t tokens, size_t hidden, float eps, qr_dtype dtype,
                                         qr_regime regime, int cast_bf16_to_fp16, void* stream);

/* The host reference of that call for a group of `world_size` ranks whose
 * inputs are inputs[r] and whose residual is the same `residual` (may be
 * NULL) on every rank: qr_reference_all_reduce's all-reduce (same policy,
 * configuration and errors), then the epilogue, into residual_out and
 * norm_out (disjoint from each other; either may equal an input). Returns
 * QR_INVALID_ARGUMENT (as qr_reference_all_reduce, or hidden not a positive
 * multiple of 8, NULL weight or outputs), QR_UNSUPPORTED. */
qr_status qr_reference_all_reduce_residual_rmsnorm(const void* const* inputs, int world_size,
                                                   const void* residual, const void* weight,
                                                   size_t tokens, size_t hidden, float eps,
                                                   qr_dtype dtype, qr_regime regime,
                                                   int cast_bf16_to_fp16, void* residual_out,
                                                   void* norm_out);

/* qr_all_reduce_residual_rmsnorm, and the norm quantized to FP8 e4m3 for
 * the next GEMM with a static per-tensor scale (vLLM's
 * fused_add_rms_norm_static_fp8_quant, FlashInfer's
 * kARResidualRMSNorm(Out)FP8Quant): residual_out and norm_out exactly as
 * there, and per element
 *   quant_out = e4m3(float(norm_out) * (1 / *scale))
 * from the dtype-rounded norm_out (what an RMSNorm kernel followed by a
 * static-quant kernel reads), the reciprocal and the product fp32 and
 * correctly rounded, e4m3 the OCP E4M3FN format (bias 7, no infinities)
 * rounded to nearest even and saturating: beyond +-448 (inf included) gives
 * +-448, NaN gives 0x7F. quant_out holds tokens * hidden bytes, 16-byte
 * aligned, disjoint from every other buffer; scale is one fp32, 4-byte
 * aligned, in the memory the backend computes in (device memory on a GPU,
 * read by the kernel when it runs, so a captured graph reads its value at
 * each replay; host memory on the host backend), disjoint from every buffer.
 * A NULL quant_out or scale is QR_INVALID_ARGUMENT; other arguments and
 * statuses as qr_all_reduce_residual_rmsnorm. */
qr_status qr_all_reduce_residual_rmsnorm_fp8(qr_comm* c, const void* in, const void* residual,
                                             const void* weight, void* residual_out, void* norm_out,
                                             void* quant_out, const float* scale, size_t tokens,
                                             size_t hidden, float eps, qr_dtype dtype,
                                             qr_regime regime, int cast_bf16_to_fp16, void* stream);

/* The host reference of that call: qr_reference_all_reduce_residual_rmsnorm,
 * then quant_out (tokens * hidden bytes, disjoint from the other outputs)
 * from norm_out with *scale (host memory). Its errors, and
 * QR_INVALID_ARGUMENT for a NULL quant_out or scale. */
qr_status qr_reference_all_reduce_residual_rmsnorm_fp8(
    const void* const* inputs, int world_size, const void* residual, const void* weight,
    size_t tokens, size_t hidden, float eps, const float* scale, qr_dtype dtype, qr_regime regime,
    int cast_bf16_to_fp16, void* residual_out, void* norm_out, void* quant_out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QR_COMM_QUICKREDUCE_H_ */
