// The C ABI's additions for introspection and checking (comm/quickreduce.h,
// "Introspection and the host reference"): version, the effective
// configuration as JSON, should-all-reduce for a given regime, and the host
// reference of exactly the call a group would run. Kept apart from the fixed
// contract in comm/c_api.cc; like it, nothing here throws or aborts on
// caller input.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "comm/c_api_internal.h"
#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/host_backend.h"
#include "comm/policy.h"
#include "comm/quickreduce.h"
#include "common/limits.h"
#include "common/status.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ipc/names.h"
#include "ipc/segment.h"
#include "kernels/error_bound.h"
#include "kernels/one_shot_reference.h"
#include "kernels/platform/platform.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"
#include "nlohmann/json.hpp"

namespace qr {
namespace {

using ::nlohmann::json;

thread_local std::string config_text;

json OptionalBytes(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

json ConfigJson(const Config& config, const int* world_sizes, int num_world_sizes) {
  json j;
  j["version"] = kVersion;
  j["platform"] = PlatformName(config.platform);
  j["regime"] = RegimeName(config.regime);
  j["cast_bf16_to_fp16"] = config.cast_bf16_to_fp16;
  j["max_size_bytes"] = config.max_size_bytes;
  j["min_size_bytes_override"] = OptionalBytes(config.min_size_bytes_override);
  j["quantization_min_size_bytes"] = OptionalBytes(config.quantization_min_size_bytes);
  j["one_shot_max_bytes"] = OptionalBytes(config.one_shot_max_bytes);
  j["min_size_table_file"] = config.min_size_table.has_value();
  j["op_timeout_ms"] = config.op_timeout_ms;
  j["allow_shared_device"] = config.allow_shared_device;
  json ceilings = json::object();
  json floors = json::object();
  json shm = json::object();
  for (int i = 0; i < num_world_sizes; ++i) {
    const int ws = world_sizes[i];
    const std::string key = std::to_string(ws);
    ceilings[key] = OneShotCeilingBytes(config, ws);
    json row = json::object();
    for (DType d : {DType::kFloat16, DType::kBFloat16}) {
      const int64_t floor = EffectiveMinSizeBytes(config, d, ws);
      row[DTypeName(d)] = floor == kNeverEligible ? json(nullptr) : json(floor);
    }
    floors[key] = row;
    // What a group of this size puts in /dev/shm (all ranks together).
    const uint64_t segment = ipc::GroupSegmentBytes(ws);
    shm[key] = {{"gpu", segment},
                {"host", segment + static_cast<uint64_t>(ws) *
                                       HostSegmentBytes(ws, OneShotCeilingBytes(config, ws))}};
  }
  j["one_shot_ceiling_bytes"] = ceilings;
  j["min_size_bytes"] = floors;
  j["shm_bytes"] = shm;
  return j;
}

// What one call runs: the validated parameters (codec and cast as the group
// would use them) and the algorithm, from the same policy functions the
// communicator calls.
struct ReferencePlan {
  kernels::TwoShotParams params;
  Algorithm algorithm = Algorithm::kTwoShot;
};

// The reference reads the host backend's configuration: the platform only
// picks defaults, and of those only the bf16 cast changes results (off on the
// host and NVIDIA, on on AMD: pass it explicitly there).
StatusOr<Config> ReferenceConfig() { return LoadConfigFromEnv(Platform::kHost); }

StatusOr<ReferencePlan> PlanCall(const Config& config, const void* const* inputs, int world_size,
                                 size_t count, int dtype, int regime, int cast,
                                 const void* output) {
  QR_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  if (dtype != QR_FLOAT16 && dtype != QR_BFLOAT16) {
    return InvalidArgumentError("dtype " + std::to_string(dtype) +
                                " is not QR_FLOAT16 (0) or QR_BFLOAT16 (1)");
  }
  const bool configured = regime == QR_REGIME_CONFIGURED;
  if (!configured && !IsValidRegime(regime)) {
    return InvalidArgumentError("regime " + std::to_string(regime) +
                                " is not a qr_regime (0..5) or QR_REGIME_CONFIGURED (-1)");
  }
  const Regime r = configured ? config.regime : static_cast<Regime>(regime);
  if (r == Regime::kNone) {
    return UnsupportedError("reference: regime NONE declines quick-reduce");
  }
  if (r == Regime::kInt3 && world_size != 2) {
    return UnsupportedError("reference: INT3 needs world size 2, not " +
                            std::to_string(world_size));
  }
  if (inputs == nullptr || output == nullptr) {
    return InvalidArgumentError(std::string("reference: ") +
                                (inputs == nullptr ? "inputs" : "output") + " is NULL");
  }
  for (int i = 0; i < world_size; ++i) {
    if (inputs[i] == nullptr) {
      return InvalidArgumentError("reference: inputs[" + std::to_string(i) + "] is NULL");
    }
  }
  if (count > static_cast<size_t>(config.max_size_bytes) / 2) {
    return InvalidArgumentError(
        "reference: message of " + std::to_string(count) + " values exceeds the maximum of " +
        std::to_string(config.max_size_bytes) + " bytes (QR_MAX_SIZE_BYTES_MB)");
  }
  const size_t bytes = count * 2;
  if (!IsWholeMessageUnits(bytes)) {
    return InvalidArgumentError("reference: message of " + std::to_string(bytes) +
                                " bytes is not a multiple of 16 bytes");
  }
  ReferencePlan plan;
  kernels::TwoShotParams& p = plan.params;
  p.world_size = world_size;
  p.dtype = static_cast<DType>(dtype);
  p.num_elems = static_cast<int64_t>(count);
  p.codec = configured ? EffectiveCodec(config, r, bytes) : CodecForRegime(r);
  const bool want_cast = configured ? config.cast_bf16_to_fp16 : cast != 0;
  p.cast_bf16_to_fp16 = want_cast && p.dtype == DType::kBFloat16;
  plan.algorithm = ChooseAlgorithm(config, bytes, world_size,
                                   WorkFormatOf(p.dtype, p.cast_bf16_to_fp16), p.codec);
  return plan;
}

// Runs the plan over per-rank output copies (the reference functions write
// one output per rank) and returns rank 0's.
StatusOr<std::vector<uint16_t>> RunPlan(const ReferencePlan& plan, const void* const* inputs) {
  const kernels::TwoShotParams& p = plan.params;
  const size_t n = static_cast<size_t>(p.num_elems);
  std::vector<std::vector<uint16_t>> outs(static_cast<size_t>(p.world_size),
                                          std::vector<uint16_t>(n));
  std::vector<const uint16_t*> in_ptrs(static_cast<size_t>(p.world_size));
  std::vector<uint16_t*> out_ptrs(static_cast<size_t>(p.world_size));
  for (int r = 0; r < p.world_size; ++r) {
    in_ptrs[r] = static_cast<const uint16_t*>(inputs[r]);
    out_ptrs[r] = outs[r].data();
  }
  if (plan.algorithm == Algorithm::kOneShot) {
    QR_RETURN_IF_ERROR(kernels::ReferenceOneShotAllReduce(p, in_ptrs.data(), out_ptrs.data()));
  } else {
    QR_RETURN_IF_ERROR(kernels::ReferenceAllReduce(p, in_ptrs.data(), out_ptrs.data()));
  }
  for (int r = 1; r < p.world_size; ++r) {
    if (outs[r] != outs[0]) {
      return InternalError("reference: rank " + std::to_string(r) +
                           "'s result differs from rank 0's");
    }
  }
  return std::move(outs[0]);
}

Status ReferenceAllReduce(const void* const* inputs, int world_size, size_t count, int dtype,
                          int regime, int cast, void* output) {
  QR_ASSIGN_OR_RETURN(const Config config, ReferenceConfig());
  QR_ASSIGN_OR_RETURN(const ReferencePlan plan,
                      PlanCall(config, inputs, world_size, count, dtype, regime, cast, output));
  if (count == 0) return OkStatus();
  QR_ASSIGN_OR_RETURN(const std::vector<uint16_t> result, RunPlan(plan, inputs));
  std::memcpy(output, result.data(), result.size() * sizeof(uint16_t));
  return OkStatus();
}

Status ReferenceCheckBound(const void* const* inputs, int world_size, size_t count, int dtype,
                           int regime, int cast, const void* output, double* max_ratio,
                           size_t* violations) {
  if (max_ratio == nullptr || violations == nullptr) {
    return InvalidArgumentError("reference_check_bound: max_ratio or violations is NULL");
  }
  *max_ratio = 0;
  *violations = 0;
  QR_ASSIGN_OR_RETURN(const Config config, ReferenceConfig());
  QR_ASSIGN_OR_RETURN(ReferencePlan plan,
                      PlanCall(config, inputs, world_size, count, dtype, regime, cast, output));
  if (count == 0) return OkStatus();
  // One-shot moves exact values: its bound is FP's without the cast
  // (kernels/one_shot_reference.h).
  if (plan.algorithm == Algorithm::kOneShot) {
    plan.params.codec = Codec::kFp;
    plan.params.cast_bf16_to_fp16 = false;
  }
  std::vector<const uint16_t*> in_ptrs(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) in_ptrs[r] = static_cast<const uint16_t*>(inputs[r]);
  const kernels::BoundCheck check = kernels::CheckTwoShotOutput(
      plan.params, in_ptrs.data(), static_cast<const uint16_t*>(output));
  *max_ratio = check.max_ratio;
  *violations = static_cast<size_t>(check.violations);
  return OkStatus();
}

Status ReferenceErrorBounds(const void* const* inputs, int world_size, size_t count, int dtype,
                            int regime, int cast, double* bounds) {
  if (regime == QR_REGIME_CONFIGURED || regime == QR_REGIME_NONE) {
    return InvalidArgumentError("reference_error_bounds: regime " + std::to_string(regime) +
                                " names no codec: pass FP, INT8, INT6, INT4 or INT3");
  }
  if (bounds == nullptr) return InvalidArgumentError("reference_error_bounds: bounds is NULL");
  // Explicit regime and cast: the configuration only sets the size limit here.
  QR_ASSIGN_OR_RETURN(const Config config, ReferenceConfig());
  QR_ASSIGN_OR_RETURN(const ReferencePlan plan,
                      PlanCall(config, inputs, world_size, count, dtype, regime, cast, bounds));
  if (count == 0) return OkStatus();
  std::vector<const uint16_t*> in_ptrs(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) in_ptrs[r] = static_cast<const uint16_t*>(inputs[r]);
  kernels::TwoShotErrorBounds(plan.params, in_ptrs.data(), bounds);
  return OkStatus();
}

}  // namespace
}  // namespace qr

extern "C" {

const char* qr_version(void) { return qr::kVersion; }

const char* qr_config_json(const qr_comm* c) {
  try {
    if (c != nullptr) {
      const qr::Communicator& comm = qr::internal::CommunicatorOf(c);
      const int ws = comm.world_size();
      qr::config_text = qr::ConfigJson(comm.config(), &ws, 1).dump();
    } else {
      qr::StatusOr<qr::Config> config = qr::ReferenceConfig();
      if (!config.ok()) {
        qr::internal::RecordCStatus(config.status());
        return nullptr;
      }
      qr::config_text =
          qr::ConfigJson(*config, qr::kSupportedWorldSizes, qr::kNumSupportedWorldSizes).dump();
    }
  } catch (const std::exception& e) {
    // json::dump throws only on invalid UTF-8, which no field can hold; this
    // keeps the promise that no exception crosses the C ABI.
    qr::internal::RecordCStatus(qr::InternalError(std::string("qr_config_json: ") + e.what()));
    return nullptr;
  }
  qr::internal::RecordCStatus(qr::OkStatus());
  return qr::config_text.c_str();
}

int qr_should_all_reduce_ex(const qr_comm* c, size_t bytes, qr_dtype dtype, qr_regime regime,
                            int cast_bf16_to_fp16) {
  if (c == nullptr || (dtype != QR_FLOAT16 && dtype != QR_BFLOAT16) ||
      !qr::IsValidRegime(static_cast<int>(regime))) {
    return 0;
  }
  return qr::internal::CommunicatorOf(c).ShouldAllReduce(bytes, static_cast<qr::DType>(dtype),
                                                         static_cast<qr::Regime>(regime),
                                                         cast_bf16_to_fp16 != 0)
             ? 1
             : 0;
}

qr_status qr_reference_all_reduce(const void* const* inputs, int world_size, size_t count,
                                  qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                                  void* output) {
  return qr::internal::RecordCStatus(
      qr::ReferenceAllReduce(inputs, world_size, count, dtype, regime, cast_bf16_to_fp16, output));
}

qr_status qr_reference_check_bound(const void* const* inputs, int world_size, size_t count,
                                   qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                                   const void* output, double* max_ratio, size_t* violations) {
  return qr::internal::RecordCStatus(qr::ReferenceCheckBound(
      inputs, world_size, count, dtype, regime, cast_bf16_to_fp16, output, max_ratio, violations));
}

qr_status qr_reference_error_bounds(const void* const* inputs, int world_size, size_t count,
                                    qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16,
                                    double* bounds) {
  return qr::internal::RecordCStatus(qr::ReferenceErrorBounds(inputs, world_size, count, dtype,
                                                              regime, cast_bf16_to_fp16, bounds));
}

}  // extern "C"
