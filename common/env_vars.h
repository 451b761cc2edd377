// Every environment variable quickreduce reads, declared once (in the spirit
// of NCCL's NCCL_PARAM): name, vLLM alias, type, built-in default, range, and
// the text README.md's "Environment variables" table shows for it. Code reads
// a variable only through its declaration here (common/env.h's EnvVar
// readers), so the parse, the range and the error message are the same
// wherever it is read, and //common:env_vars_readme_test keeps README.md's
// table equal to this one (same variables, order, aliases, defaults, text).
//
// Who reads what: comm/config.cc the data-path settings (LoadConfigFromEnv)
// and the join timeout, common/logging.cc QR_LOG_LEVEL and QR_LOG_FILE, ipc/ the broker's
// socket, autostart and binary (ipc must not depend on comm, so the table
// lives here), the Python package the last seven (it cannot use the readers;
// //python:py_env_declared keeps it from reading one the table lacks). Defaults the table cannot
// hold are computed by their reader: the cast and the min-size floor depend on the platform
// (comm/config.h), the one-shot ceiling on the world size (comm/policy.h), the socket and the
// broker binary on the running process (ipc/names.h, ipc/broker_client.h).
//
// Adding a variable: declare it here, add it to kEnvVars, read it through the
// declaration, and add its README row (the test says what is missing).
#ifndef QR_COMMON_ENV_VARS_H_
#define QR_COMMON_ENV_VARS_H_

#include <cstdint>

#include "common/env.h"
#include "common/limits.h"

namespace qr {

// Ranges of the size and timeout variables: sizes stay within int64 bytes
// after scaling, timeouts at most common/limits.h's cap.
inline constexpr int64_t kEnvMaxMiB = int64_t{1} << 20;
inline constexpr int64_t kEnvMaxKiB = (int64_t{1} << 62) / 1024;
inline constexpr int64_t kEnvMaxTimeoutMs = kMaxTimeoutMs;

inline constexpr EnvVar kEnvLogLevel = EnvChoiceVar(
    "QR_LOG_LEVEL", "", "warn", "trace,debug,info,warn,error,critical,off",
    "`warn` (daemons: `info`)",
    "trace, debug, info, warn, error, critical, off; the library logs to stderr through its own "
    "`quickreduce` logger and never touches the host program's spdlog setup; an invalid value "
    "fails `qr_join`");

inline constexpr EnvVar kEnvLogFile = EnvStringVar(
    "QR_LOG_FILE", "", "unset (stderr)",
    "file the `quickreduce` logger appends to instead of stderr, as NCCL_DEBUG_FILE: `%h` is "
    "replaced by the host name, `%p` by the pid (`%%` is `%`), e.g. `/tmp/qr.%h.%p.log`; one that "
    "cannot be opened leaves logging on stderr, with a warning there");

inline constexpr EnvVar kEnvQuantization = EnvChoiceVar(
    "QR_QUANTIZATION", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "FP", "FP,INT8,INT6,INT4,INT3,NONE",
    "`FP` (exact 16-bit wire)",
    "FP, INT8, INT6, INT4, INT3 (INT3 only at world size 2), NONE (quick-reduce declines every "
    "call: set it to disable); see `docs/codecs.md`");

inline constexpr EnvVar kEnvCastBf16ToFp16 = EnvBoolVar(
    "QR_CAST_BF16_TO_FP16", "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", kNoEnvFallback,
    "`1` on AMD (as in vLLM), `0` on NVIDIA and the host backend",
    "reduce bf16 as fp16, saturating at ±65504 (values beyond it are clipped; on NVIDIA native "
    "bf16 is also faster)");

inline constexpr EnvVar kEnvMaxSizeMb =
    EnvIntVar("QR_MAX_SIZE_BYTES_MB", "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", 2048, 1,
              kEnvMaxMiB, "`2048`", "largest eligible message, 1 .. 1048576 MiB");

inline constexpr EnvVar kEnvMinSizeMb = EnvIntVar(
    "QR_MIN_SIZE_BYTES_MB", "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", kNoEnvFallback, 0,
    kEnvMaxMiB, "the platform's built-in table",
    "smallest eligible message, overrides every table; 0 = no floor; must not exceed the max");

inline constexpr EnvVar kEnvQuantizationMinSizeKb =
    EnvIntVar("QR_QUANTIZATION_MIN_SIZE_KB", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION_MIN_SIZE_KB",
              kNoEnvFallback, 0, kEnvMaxKiB, "unset", "messages below it use the FP codec");

inline constexpr EnvVar kEnvOneShotMaxKb = EnvIntVar(
    "QR_ONE_SHOT_MAX_KB", "", kNoEnvFallback, 0, kEnvMaxKiB,
    "built in: 4096 at world size 2 (fp16 INT4/INT3: 3072), 1024 at 4, 256 at 8",
    "messages up to it run one-shot (exact, one hop; the regime's codec is not used), larger "
    "ones two-shot; 0 = never; capped by the one-shot buffer and by the per-codec caps (fp16 "
    "INT4/INT3 at world size 2: 3 MiB, where their two-shot is faster); must be the same on "
    "every rank (a join whose members differ fails with INVALID_ARGUMENT); see `docs/codecs.md` "
    "sections 7 and 8");

inline constexpr EnvVar kEnvMinSizeTable = EnvStringVar(
    "QR_MIN_SIZE_TABLE", "", "unset",
    "path of a min-size table (rows `fp16 ws2 1 2 2 1 1` in MiB for FP..INT3, as `qr-bench "
    "--min-size-table` prints) replacing the built-in rows it lists");

inline constexpr EnvVar kEnvBrokerSocket = EnvStringVar(
    "QR_BROKER_SOCKET", "",
    "`$XDG_RUNTIME_DIR/quickreduce/broker.sock`, else `/tmp/quickreduce-<uid>/broker.sock`",
    "the broker's Unix socket; honoured by `qr-broker`, `qrctl` and clients");

inline constexpr EnvVar kEnvBrokerAutostart =
    EnvBoolVar("QR_BROKER_AUTOSTART", "", 1, "`1`",
               "a client that finds no broker starts one (race-safe: one wins)");

inline constexpr EnvVar kEnvBrokerBin = EnvStringVar(
    "QR_BROKER_BIN", "",
    "`qr-broker` beside the client's executable, else in its Bazel runfiles, else on `$PATH`",
    "the broker binary autostart runs");

inline constexpr EnvVar kEnvJoinTimeoutMs = EnvIntVar(
    "QR_JOIN_TIMEOUT_MS", "", 60000, 1, kEnvMaxTimeoutMs, "`60000`",
    "how long `qr_join` waits for the other ranks when `qr_join_options.timeout_ms <= 0`");

inline constexpr EnvVar kEnvOpTimeoutMs = EnvIntVar(
    "QR_OP_TIMEOUT_MS", "", 30000, 1, kEnvMaxTimeoutMs, "`30000`",
    "bound of every wait inside an all-reduce (host backend and GPU kernels); a wait that runs "
    "out fails the call with `QR_TIMEOUT` and aborts the group so peers stop too");

inline constexpr EnvVar kEnvAllowSharedDevice = EnvBoolVar(
    "QR_ALLOW_SHARED_DEVICE", "", 0, "`0`",
    "testing mode for a one-GPU machine under NVIDIA MPS: `1` on every rank lets ranks share "
    "one GPU (grids capped so all their blocks are resident together; kernel logic, not speed); "
    "without it the same GPU twice in a group is `QR_ALREADY_EXISTS`; see `docs/gpu-testing.md`");

inline constexpr EnvVar kEnvProgrammaticLaunch = EnvBoolVar(
    "QR_PROGRAMMATIC_LAUNCH", "", 1, "`1`",
    "`1` launches the GPU kernels with programmatic dependent launch where the GPU has it "
    "(NVIDIA Hopper and later; elsewhere plain launches): a kernel's start-up overlaps the end of "
    "the previous kernel on the stream (a GEMM, in a model; 0-1.9 us saved a call on an H200, "
    "`docs/fused.md`); `0` launches plainly");

// Read by the Python package (python/quickreduce), not by the C++ code: declared
// here so that README.md's table lists them too, and //python:py_env_declared
// fails when the package reads a QR_ variable this table lacks. The package
// takes `1` as on and anything else as off.
inline constexpr EnvVar kEnvLibrary = EnvStringVar(
    "QR_LIBRARY", "", "`bazel-bin/comm/libquickreduce.so` of the source tree",
    "Python package: the `libquickreduce.so` it loads when the package holds none (a source "
    "checkout); see `docs/python.md`");

inline constexpr EnvVar kEnvQrctlBin = EnvStringVar(
    "QR_QRCTL_BIN", "", "the packaged `qrctl`, else `bazel-bin/tools/qrctl` of the source tree",
    "Python package: the `qrctl` that `python3 -m quickreduce status` and `gc` run");

inline constexpr EnvVar kEnvVllm = EnvBoolVar(
    "QR_VLLM", "", 0, "`0`",
    "Python package: `1` makes the vLLM plugin install quickreduce (also under "
    "`--disable-custom-all-reduce`), `0` keeps it out even when `VLLM_PLUGINS` names it; see "
    "`docs/python.md`");

inline constexpr EnvVar kEnvVllmKeepNative = EnvBoolVar(
    "QR_VLLM_KEEP_NATIVE", "", 0, "`0`",
    "Python package: `1` keeps vLLM's own ROCm quick all-reduce where it is active instead of "
    "replacing it");

inline constexpr EnvVar kEnvSglang = EnvBoolVar(
    "QR_SGLANG", "", 0, "`0`",
    "Python package: `1` makes the SGLang adapter install quickreduce (also under "
    "`--disable-custom-all-reduce`), `0` keeps it out even when `SGLANG_PLUGINS` names it; see "
    "`docs/python.md`");

inline constexpr EnvVar kEnvSglangKeepNative = EnvBoolVar(
    "QR_SGLANG_KEEP_NATIVE", "", 0, "`0`",
    "Python package: `1` keeps SGLang's own ROCm quick all-reduce where it is active instead of "
    "replacing it");

inline constexpr EnvVar kEnvSglangFirst = EnvBoolVar(
    "QR_SGLANG_FIRST", "", 0, "`0`",
    "Python package: `1` makes SGLang's custom all-reduce decline what quickreduce takes");

inline constexpr EnvVar kEnvNodeId = EnvStringVar(
    "QR_NODE_ID", "", "the host name",
    "Python package: the node a torch.distributed rank of backend `quickreduce` is on; ranks "
    "with the same id form one quickreduce group, the others are reached through gloo/NCCL; see "
    "`docs/distributed.md`");

// In README.md's order.
inline constexpr const EnvVar* kEnvVars[] = {
    &kEnvLogLevel,
    &kEnvLogFile,
    &kEnvQuantization,
    &kEnvCastBf16ToFp16,
    &kEnvMaxSizeMb,
    &kEnvMinSizeMb,
    &kEnvQuantizationMinSizeKb,
    &kEnvOneShotMaxKb,
    &kEnvMinSizeTable,
    &kEnvBrokerSocket,
    &kEnvBrokerAutostart,
    &kEnvBrokerBin,
    &kEnvJoinTimeoutMs,
    &kEnvOpTimeoutMs,
    &kEnvAllowSharedDevice,
    &kEnvProgrammaticLaunch,
    &kEnvLibrary,
    &kEnvQrctlBin,
    &kEnvVllm,
    &kEnvVllmKeepNative,
    &kEnvSglang,
    &kEnvSglangKeepNative,
    &kEnvSglangFirst,
    &kEnvNodeId,
};

}  // namespace qr

#endif  // QR_COMMON_ENV_VARS_H_
