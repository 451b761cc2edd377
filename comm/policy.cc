#include "comm/policy.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include "common/limits.h"
#include "common/logging.h"
#include "kernels/geometry.h"

namespace qr {
namespace {

// Built-in min-size tables, MiB per (dtype, world size index) in the order
// FP, INT8, INT6, INT4, INT3; qr-bench re-derives one per machine
// (QR_MIN_SIZE_TABLE).
//
// AMD: vLLM's, tuned on MI300X for kernels without a one-shot path.
constexpr int64_t kAmdTableMiB[2][3][5] = {
    // fp16: ws 2, 4, 8
    {{1, 2, 2, 1, 1}, {1, 16, 4, 2, 2}, {16, 4, 4, 2, 2}},
    // bf16: ws 2, 4, 8
    {{2, 8, 8, 8, 8}, {8, 64, 64, 16, 16}, {16, 2048, 2048, 2048, 2048}},
};
// NVIDIA Hopper: our own kernels. At world size 2 on 2 x H200 qr-bench derived
// 0 in every cell, bf16 and bf16cast too (docs/perf/*-h200x2-min_size_table.txt):
// the policy's pick beats NCCL at every measured size from 16 KiB to 1 GiB.
// World sizes 4 and 8 have not run on 4 or 8 GPUs (docs/performance.md); no
// floor there either until a measurement says otherwise, as one-shot covers
// the latency-bound sizes where a floor would matter.
constexpr int64_t kNvidiaTableMiB[2][3][5] = {};
// KiB per world size 2, 4, 8 up to which a call runs one-shot. World size 2
// is measured on 2 x H200 (docs/performance.md): one-shot moves the same bytes
// as two-shot FP there, in one hop, and beat two-shot FP, INT8 and INT6 up to
// the region's 4 MiB. 4 and 8 are estimates until they run on hardware
// (issue 8): one-shot moves (ws-1) messages per rank against two-shot's
// 2(ws-1)/ws, so the crossover falls as the world size grows.
constexpr int64_t kOneShotMaxKiB[3] = {4096, 1024, 256};

// Lower ceilings for the calls whose two-shot codec beats one-shot below the
// world size's ceiling. They cap whatever ceiling applies (built in or
// QR_ONE_SHOT_MAX_KB), so a call's ceiling follows from OneShotCeilingBytes
// alone, the value the members of a group compare at join.
//
// fp16 INT4 and INT3 at world size 2, measured on 2 x H200 in graph mode
// (docs/perf/2026-11-30{b,c}-h200x2-bench.csv): two-shot beat one-shot at 4
// MiB (run c: 14.15 and 14.16 us against 15.06; run b: 14.28 and 14.55
// against 15.09) and lost at 2 MiB (12.01 and 12.26 against 9.20). Both grow
// linearly in between (one-shot 2.9 us per MiB, two-shot 1.0-1.1), so they
// cross at 3.5 MiB in both runs; the cap is the whole MiB below. bf16
// INT4/INT3 tie or lose at 4 MiB (run c: 15.17 and 15.27 against 15.06; run
// b: 15.30 and 15.46 against 15.11), bf16 cast loses (16.13 and 16.35), and
// FP/INT8/INT6 lose in every work format (16.2-20.5 us): none has a cap.
struct OneShotCodecCap {
  int world_size;
  WorkFormat format;
  Codec codec;
  int64_t kib;
};
constexpr OneShotCodecCap kOneShotCodecCaps[] = {
    {2, WorkFormat::kFp16, Codec::kInt4, 3072},
    {2, WorkFormat::kFp16, Codec::kInt3, 3072},
};

// The cap of (world size, format, codec) in bytes; none: the largest int64.
int64_t CodecCapBytes(int world_size, WorkFormat format, Codec codec) {
  for (const OneShotCodecCap& c : kOneShotCodecCaps) {
    if (c.world_size == world_size && c.format == format && c.codec == codec) return c.kib * kKiB;
  }
  return std::numeric_limits<int64_t>::max();
}

bool Decline(std::string* why_not, std::string reason) {
  if (why_not != nullptr) *why_not = std::move(reason);
  return false;
}

// Where the floor came from, for a decline's reason.
std::string MinSizeSource(const Config& config) {
  if (config.min_size_bytes_override.has_value()) return "QR_MIN_SIZE_BYTES_MB";
  if (config.min_size_table.has_value()) return "QR_MIN_SIZE_TABLE or the built-in table";
  return std::string("the built-in ") + PlatformName(config.platform) + " min-size table";
}

}  // namespace

int64_t MinSizeBytes(Platform platform, DType dtype, int world_size, Regime regime,
                     bool cast_bf16_to_fp16) {
  const int ws = WorldSizeIndex(world_size);
  if (ws < 0 || regime == Regime::kNone || !IsValidRegime(static_cast<int>(regime)) ||
      !IsValidDType(static_cast<int>(dtype))) {
    return kNeverEligible;
  }
  const int row = static_cast<int>(WorkDType(dtype, cast_bf16_to_fp16));
  const int r = static_cast<int>(regime);
  switch (platform) {
    case Platform::kAmd:
      return kAmdTableMiB[row][ws][r] * kMiB;
    case Platform::kNvidia:
      return kNvidiaTableMiB[row][ws][r] * kMiB;
    // The host backend exists for tests and CI: a floor would only hide calls
    // from them.
    case Platform::kHost:
      return 0;
  }
  return kNeverEligible;
}

int64_t EffectiveMinSizeBytes(const Config& config, DType dtype, int world_size) {
  if (config.min_size_bytes_override.has_value()) return *config.min_size_bytes_override;
  const int64_t builtin =
      MinSizeBytes(config.platform, dtype, world_size, config.regime, config.cast_bf16_to_fp16);
  if (builtin == kNeverEligible || !config.min_size_table.has_value()) return builtin;
  const int row = static_cast<int>(WorkDType(dtype, config.cast_bf16_to_fp16));
  const int64_t mib =
      (*config.min_size_table)[row][WorldSizeIndex(world_size)][static_cast<int>(config.regime)];
  return mib >= 0 ? mib * kMiB : builtin;
}

bool ShouldAllReduce(const Config& config, size_t bytes, DType dtype, int world_size,
                     std::string* why_not) {
  if (config.regime == Regime::kNone || !IsValidRegime(static_cast<int>(config.regime))) {
    return Decline(why_not,
                   "regime is NONE (QR_QUANTIZATION=NONE disables quick-reduce; unset it for FP, "
                   "or set INT8, INT6, INT4 or INT3)");
  }
  if (!IsValidDType(static_cast<int>(dtype))) {
    return Decline(why_not, "dtype is neither fp16 nor bf16");
  }
  if (!IsSupportedWorldSize(world_size)) {
    return Decline(why_not, "world size " + std::to_string(world_size) + " is not 2, 4 or 8");
  }
  if (!CodecRunsAtWorldSize(CodecForRegime(config.regime), world_size)) {
    std::string reason =
        "INT3 is only supported at world size 2, this group has " + std::to_string(world_size);
    static std::once_flag logged;
    std::call_once(logged, [&] { Log().warn("quick-reduce declines: {}", reason); });
    return Decline(why_not, std::move(reason));
  }
  if (!IsWholeMessageUnits(bytes)) {
    return Decline(why_not, std::to_string(bytes) + " bytes is not a multiple of 16");
  }
  const int64_t min = EffectiveMinSizeBytes(config, dtype, world_size);
  if (bytes < static_cast<uint64_t>(min)) {
    return Decline(why_not, std::to_string(bytes) + " bytes is below the minimum of " +
                                std::to_string(min) + " bytes (" + MinSizeSource(config) + ")");
  }
  if (bytes > static_cast<uint64_t>(config.max_size_bytes)) {
    return Decline(why_not, std::to_string(bytes) + " bytes is above the maximum of " +
                                std::to_string(config.max_size_bytes) + " bytes");
  }
  return true;
}

int64_t DefaultOneShotMaxBytes(int world_size) {
  const int ws = WorldSizeIndex(world_size);
  return ws < 0 ? 0 : kOneShotMaxKiB[ws] * kKiB;
}

int64_t DefaultOneShotMaxBytes(int world_size, WorkFormat format, Codec codec) {
  return std::min(DefaultOneShotMaxBytes(world_size), CodecCapBytes(world_size, format, codec));
}

uint64_t OneShotCeilingBytes(const Config& config, int world_size) {
  if (!IsSupportedWorldSize(world_size)) return 0;
  const int64_t ceiling = config.one_shot_max_bytes.value_or(DefaultOneShotMaxBytes(world_size));
  // What one source's part of the one-shot receive region holds.
  const int64_t region = kernels::OneShotMaxBytes(world_size);
  return static_cast<uint64_t>(std::max<int64_t>(0, std::min(ceiling, region)));
}

uint64_t OneShotCeilingBytes(const Config& config, int world_size, WorkFormat format, Codec codec) {
  const uint64_t ceiling = OneShotCeilingBytes(config, world_size);
  return std::min(ceiling, static_cast<uint64_t>(CodecCapBytes(world_size, format, codec)));
}

Algorithm ChooseAlgorithm(const Config& config, size_t bytes, int world_size, WorkFormat format,
                          Codec codec) {
  const uint64_t max = OneShotCeilingBytes(config, world_size, format, codec);
  return bytes > 0 && bytes <= max ? Algorithm::kOneShot : Algorithm::kTwoShot;
}

Codec EffectiveCodec(const Config& config, Regime regime, size_t bytes) {
  const Codec codec = CodecForRegime(regime);
  if (config.quantization_min_size_bytes.has_value() &&
      bytes < static_cast<uint64_t>(*config.quantization_min_size_bytes)) {
    return Codec::kFp;
  }
  return codec;
}

}  // namespace qr
