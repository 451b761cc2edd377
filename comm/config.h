// The communicator's configuration: the regime (codec or NONE) and the size
// limits, read once from the environment (QR_* names, vLLM's
// VLLM_ROCM_QUICK_REDUCE_* names as aliases; DESIGN.md "Configuration").
// Defaults depend on the platform the group runs on (kernels/platform/platform.h):
// an unset environment runs FP everywhere, with no floor on NVIDIA and the host
// backend, vLLM's MI300X min-size table on AMD, and bf16 reduced natively
// except on AMD (where the cast stays the default, as in vLLM).
//
//   QR_ASSIGN_OR_RETURN(Config config, LoadConfigFromEnv(Platform::kNvidia));
//   if (ShouldAllReduce(config, bytes, dtype, world_size)) ...   // comm/policy.h
#ifndef QR_COMM_CONFIG_H_
#define QR_COMM_CONFIG_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/env_vars.h"
#include "common/status.h"
#include "kernels/platform/platform.h"
#include "kernels/types.h"

namespace qr {

// qr_regime of the C ABI: a codec, or NONE (quick-reduce declines every call).
enum class Regime : int { kFp = 0, kInt8 = 1, kInt6 = 2, kInt4 = 3, kInt3 = 4, kNone = 5 };

// "FP", "INT8", "INT6", "INT4", "INT3", "NONE"; "?" out of range.
const char* RegimeName(Regime regime);

// True for 0..5.
constexpr bool IsValidRegime(int value) { return value >= 0 && value <= 5; }

// The codec a regime runs with. Must not be called with kNone (a bug: aborts).
Codec CodecForRegime(Regime regime);

inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kKiB = int64_t{1} << 10;
// The declared defaults and ranges (common/env_vars.h), in the units Config uses.
inline constexpr int64_t kDefaultMaxSizeBytes = kEnvMaxSizeMb.fallback * kMiB;
inline constexpr int64_t kDefaultOpTimeoutMs = kEnvOpTimeoutMs.fallback;
inline constexpr int64_t kMaxOpTimeoutMs = kEnvOpTimeoutMs.max;
// QR_MAX_SIZE_BYTES_MB accepts 1 .. this many MiB (1 TiB).
inline constexpr int64_t kMaxMaxSizeMb = kEnvMaxSizeMb.max;

// A min-size table in MiB, indexed [dtype][world size 2/4/8 -> 0/1/2][regime
// FP..INT3]; -1 where a table file has no row (the built-in row applies).
using MinSizeTableMiB = std::array<std::array<std::array<int64_t, 5>, 3>, 2>;

// True when bf16 is reduced through fp16 unless QR_CAST_BF16_TO_FP16 says
// otherwise: on AMD only (vLLM's default there). On NVIDIA native bf16 is
// faster than the cast (docs/performance.md), and the cast clips values above
// 65504; the host backend follows the exact path.
constexpr bool DefaultCastBf16ToFp16(Platform platform) { return platform == Platform::kAmd; }

// The defaults (an unset environment) are those of the host platform; use
// LoadConfigFromEnv for another platform's.
struct Config {
  // Where the group runs: picks the built-in min-size table (comm/policy.h)
  // and the cast default.
  Platform platform = Platform::kHost;
  Regime regime = Regime::kFp;     // QR_QUANTIZATION, default FP (NONE declines all)
  bool cast_bf16_to_fp16 = false;  // QR_CAST_BF16_TO_FP16, default DefaultCastBf16ToFp16
  int64_t max_size_bytes = kDefaultMaxSizeBytes;  // QR_MAX_SIZE_BYTES_MB * 2^20
  // QR_MIN_SIZE_BYTES_MB * 2^20: replaces the min-size table (0 = no floor).
  std::optional<int64_t> min_size_bytes_override;
  // QR_QUANTIZATION_MIN_SIZE_KB * 2^10: calls below it use the FP codec.
  std::optional<int64_t> quantization_min_size_bytes;
  // QR_ONE_SHOT_MAX_KB * 2^10: calls up to this size run one-shot (0 = never);
  // unset: the built-in per-world-size ceiling (comm/policy.h).
  std::optional<int64_t> one_shot_max_bytes;
  // QR_MIN_SIZE_TABLE=path: rows that replace the built-in table's (as printed
  // by qr-bench); QR_MIN_SIZE_BYTES_MB still wins over both.
  std::optional<MinSizeTableMiB> min_size_table;
  // QR_OP_TIMEOUT_MS: bound of every single wait of the data path (a wait
  // that runs out fails the call with kTimeout and aborts the group).
  int64_t op_timeout_ms = kDefaultOpTimeoutMs;
  // QR_ALLOW_SHARED_DEVICE=1: this rank agrees to share its GPU with other
  // ranks of the group. A testing mode for one-GPU machines under NVIDIA MPS
  // (docs/gpu-testing.md); the broker admits a shared GPU only when every rank
  // set it, and the kernels then cap their grids to fit on it together.
  bool allow_shared_device = false;
};

// Parses a min-size table in DESIGN.md's layout: one row per line,
// "<fp16|bf16> ws<2|4|8> FP INT8 INT6 INT4 INT3" with five non-negative
// integers in MiB. Blank lines, lines starting with '#', and a header line
// whose first word is FP are skipped. `source` names the file in errors.
// kInvalidArgument naming source, the line number and what is wrong for a
// malformed or duplicate row.
[[nodiscard]] StatusOr<MinSizeTableMiB> ParseMinSizeTable(std::string_view text,
                                                          std::string_view source);

// Reads the QR_* variables (aliases: VLLM_ROCM_QUICK_REDUCE_*; when both are
// set the QR_* one wins) for a group on `platform`, which sets
// Config::platform and the defaults of what is unset. Returns kInvalidArgument naming the variable
// and the allowed values for: an unknown regime, a non-boolean cast flag, a non-integer or
// out-of-range size (max 1..2^20 MiB; min and quantization thresholds >= 0), a min size above the
// max size, or a QR_MIN_SIZE_TABLE file that cannot be read or parsed. Thread-safe (reads the
// environment and that file only).
[[nodiscard]] StatusOr<Config> LoadConfigFromEnv(Platform platform);

// The join timeout in ms: `timeout_ms` when positive (qr_join_options), else
// QR_JOIN_TIMEOUT_MS, else 60000. kInvalidArgument naming the variable for a
// value that is not an integer in [1, 24 h]. Not part of Config: the join
// options, not the environment, usually set it, and a bad variable is an
// error only where it is used.
[[nodiscard]] StatusOr<int64_t> JoinTimeoutMs(int timeout_ms);

}  // namespace qr

#endif  // QR_COMM_CONFIG_H_
