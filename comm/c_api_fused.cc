// The C ABI of the fused collectives (comm/quickreduce.h "Fused
// collectives", docs/fused.md) over qr::Communicator and the host reference.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "comm/c_api_internal.h"
#include "comm/communicator.h"
#include "comm/config.h"
#include "comm/quickreduce.h"
#include "common/status.h"
#include "kernels/rmsnorm_reference.h"

namespace {

qr::Status Invalid(const std::string& what) { return qr::InvalidArgumentError(what); }

// Both C entry points of the fused call; quant_out and scale nullptr: no
// FP8 output.
qr_status RunFused(const char* fn, qr_comm* c, const void* in, const void* residual,
                   const void* weight, void* residual_out, void* norm_out, void* quant_out,
                   const float* scale, size_t tokens, size_t hidden, float eps, qr_dtype dtype,
                   qr_regime regime, int cast_bf16_to_fp16, void* stream) {
  using qr::internal::RecordCStatus;
  if (c == nullptr) return RecordCStatus(Invalid(std::string(fn) + ": communicator is NULL"));
  if (dtype != QR_FLOAT16 && dtype != QR_BFLOAT16) {
    return RecordCStatus(Invalid("dtype " + std::to_string(static_cast<int>(dtype)) +
                                 " is not QR_FLOAT16 (0) or QR_BFLOAT16 (1)"));
  }
  const auto d = static_cast<qr::DType>(dtype);
  qr::Communicator& comm = qr::internal::MutableCommunicatorOf(c);
  if (regime == QR_REGIME_CONFIGURED) {
    return RecordCStatus(comm.AllReduceResidualRmsNormFp8(in, residual, weight, residual_out,
                                                          norm_out, quant_out, scale, tokens,
                                                          hidden, eps, d, stream));
  }
  const int r = static_cast<int>(regime);
  if (!qr::IsValidRegime(r)) {
    return RecordCStatus(Invalid("regime " + std::to_string(r) +
                                 " is not a qr_regime (0..5) or QR_REGIME_CONFIGURED (-1)"));
  }
  return RecordCStatus(comm.AllReduceResidualRmsNormFp8(
      in, residual, weight, residual_out, norm_out, quant_out, scale, tokens, hidden, eps, d,
      static_cast<qr::Regime>(r), cast_bf16_to_fp16 != 0, stream));
}

qr_status Reference(const void* const* inputs, int world_size, const void* residual,
                    const void* weight, size_t tokens, size_t hidden, float eps, const float* scale,
                    qr_dtype dtype, qr_regime regime, int cast_bf16_to_fp16, void* residual_out,
                    void* norm_out, void* quant_out) {
  using qr::internal::RecordCStatus;
  if (hidden == 0 || hidden % qr::kernels::kRmsNormChunkElems != 0) {
    return RecordCStatus(Invalid("reference: hidden " + std::to_string(hidden) +
                                 " must be a positive multiple of 8"));
  }
  if (weight == nullptr || residual_out == nullptr || norm_out == nullptr) {
    return RecordCStatus(Invalid("reference: weight, residual_out and norm_out must not be NULL"));
  }
  if (tokens > std::numeric_limits<size_t>::max() / 2 / hidden) {
    return RecordCStatus(Invalid("reference: tokens x hidden overflows"));
  }
  const size_t count = tokens * hidden;
  // The all-reduce's plan, validation and bits are qr_reference_all_reduce's.
  std::vector<uint16_t> reduced(count);
  const qr_status s = qr_reference_all_reduce(inputs, world_size, count, dtype, regime,
                                              cast_bf16_to_fp16, reduced.data());
  if (s != QR_OK || count == 0) return s;
  qr::kernels::ResidualRmsNormRows rows;
  rows.dtype = static_cast<qr::DType>(dtype);
  rows.tokens = static_cast<int64_t>(tokens);
  rows.hidden = static_cast<int64_t>(hidden);
  rows.eps = eps;
  rows.reduced = reduced.data();
  // Copied: residual_out or norm_out may be the caller's residual.
  std::vector<uint16_t> res;
  if (residual != nullptr) {
    const auto* r = static_cast<const uint16_t*>(residual);
    res.assign(r, r + count);
    rows.residual = res.data();
  }
  const auto* w = static_cast<const uint16_t*>(weight);
  const std::vector<uint16_t> weights(w, w + hidden);
  rows.weight = weights.data();
  rows.residual_out = static_cast<uint16_t*>(residual_out);
  rows.norm_out = static_cast<uint16_t*>(norm_out);
  if (quant_out != nullptr) {
    rows.quant_out = static_cast<uint8_t*>(quant_out);
    rows.quant_inv_scale = qr::kernels::Fp8InverseScale(*scale);
  }
  qr::kernels::ApplyResidualRmsNorm(rows, 0, rows.tokens);
  return RecordCStatus(qr::OkStatus());
}

}  // namespace

extern "C" {

qr_status qr_all_reduce_residual_rmsnorm(qr_comm* c, const void* in, const void* residual,
                                         const void* weight, void* residual_out, void* norm_out,
                                         size_t tokens, size_t hidden, float eps, qr_dtype dtype,
                                         qr_regime regime, int cast_bf16_to_fp16, void* stream) {
  return RunFused("qr_all_reduce_residual_rmsnorm", c, in, residual, weight, residual_out, norm_out,
                  nullptr, nullptr, tokens, hidden, eps, dtype, regime, cast_bf16_to_fp16, stream);
}

qr_status qr_all_reduce_residual_rmsnorm_fp8(qr_comm* c, const void* in, const void* residual,
                                             const void* weight, void* residual_out, void* norm_out,
                                             void* quant_out, const float* scale, size_t tokens,
                                             size_t hidden, float eps, qr_dtype dtype,
                                             qr_regime regime, int cast_bf16_to_fp16,
                                             void* stream) {
  if (quant_out == nullptr || scale == nullptr) {
    return qr::internal::RecordCStatus(
        Invalid("qr_all_reduce_residual_rmsnorm_fp8: quant_out and scale must not be NULL"));
  }
  return RunFused("qr_all_reduce_residual_rmsnorm_fp8", c, in, residual, weight, residual_out,
                  norm_out, quant_out, scale, tokens, hidden, eps, dtype, regime, cast_bf16_to_fp16,
                  stream);
}

qr_status qr_reference_all_reduce_residual_rmsnorm(const void* const* inputs, int world_size,
                                                   const void* residual, const void* weight,
                                                   size_t tokens, size_t hidden, float eps,
                                                   qr_dtype dtype, qr_regime regime,
                                                   int cast_bf16_to_fp16, void* residual_out,
                                                   void* norm_out) {
  return Reference(inputs, world_size, residual, weight, tokens, hidden, eps, nullptr, dtype,
                   regime, cast_bf16_to_fp16, residual_out, norm_out, nullptr);
}

qr_status qr_reference_all_reduce_residual_rmsnorm_fp8(
    const void* const* inputs, int world_size, const void* residual, const void* weight,
    size_t tokens, size_t hidden, float eps, const float* scale, qr_dtype dtype, qr_regime regime,
    int cast_bf16_to_fp16, void* residual_out, void* norm_out, void* quant_out) {
  if (quant_out == nullptr || scale == nullptr) {
    return qr::internal::RecordCStatus(Invalid("reference: quant_out and scale must not be NULL"));
  }
  return Reference(inputs, world_size, residual, weight, tokens, hidden, eps, scale, dtype, regime,
                   cast_bf16_to_fp16, residual_out, norm_out, quant_out);
}

}  // extern "C"
