#include "comm/fused_call.h"

#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string>

#include "common/limits.h"
#include "kernels/rmsnorm_reference.h"

namespace qr {
namespace {

struct Buffer {
  const char* name;
  const void* p;
  uint64_t bytes;
  uint64_t align;    // bytes
  bool may_be_null;  // an optional buffer, absent
};

std::string Address(const void* p) {
  char text[2 + 2 * sizeof(uintptr_t) + 1];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return text;
}

bool Overlap(const Buffer& a, const Buffer& b) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a.p);
  const uintptr_t y = reinterpret_cast<uintptr_t>(b.p);
  // Overflow-free form of "[x, x + a.bytes) and [y, y + b.bytes) meet".
  return x < y ? y - x < a.bytes : x - y < b.bytes;
}

// The aliases the contract allows: the residual updated in place (on either
// input) and the normalized rows written over the partial sums.
bool AllowedAlias(const Buffer& a, const Buffer& b) {
  if (a.p != b.p) return false;
  const std::string x = a.name, y = b.name;
  auto is = [&](const char* u, const char* v) { return (x == u && y == v) || (x == v && y == u); };
  return is("residual_out", "in") || is("residual_out", "residual") || is("norm_out", "in");
}

Status Invalid(const std::string& what) {
  return InvalidArgumentError("all_reduce_residual_rmsnorm: " + what);
}

}  // namespace

Status CheckResidualRmsNormArgs(const void* in, void* norm_out, const ResidualRmsNormArgs& args,
                                uint64_t max_bytes) {
  if (args.hidden == 0 || args.hidden % kernels::kRmsNormChunkElems != 0) {
    return Invalid("hidden " + std::to_string(args.hidden) +
                   " must be a positive multiple of 8 (rows of 16 bytes)");
  }
  if (args.tokens > std::numeric_limits<uint64_t>::max() / 2 / args.hidden) {
    return Invalid(std::to_string(args.tokens) + " x " + std::to_string(args.hidden) +
                   " values overflow");
  }
  const uint64_t bytes = static_cast<uint64_t>(args.tokens) * args.hidden * 2;
  if (bytes > max_bytes) {
    return Invalid("message of " + std::to_string(bytes) + " bytes exceeds the maximum of " +
                   std::to_string(max_bytes) + " bytes (QR_MAX_SIZE_BYTES_MB)");
  }
  const bool fp8 = args.quant_out != nullptr || args.quant_scale != nullptr;
  if (fp8 && (args.quant_out == nullptr || args.quant_scale == nullptr)) {
    return Invalid(std::string("the FP8 output needs both quant_out and scale; ") +
                   (args.quant_out == nullptr ? "quant_out" : "scale") + " is NULL");
  }
  const uint64_t weight_bytes = static_cast<uint64_t>(args.hidden) * 2;
  const Buffer buffers[] = {{"in", in, bytes, kMessageAlignBytes, false},
                            {"residual", args.residual, bytes, kMessageAlignBytes, true},
                            {"weight", args.weight, weight_bytes, kMessageAlignBytes, false},
                            {"residual_out", args.residual_out, bytes, kMessageAlignBytes, false},
                            {"norm_out", norm_out, bytes, kMessageAlignBytes, false},
                            {"quant_out", args.quant_out, bytes / 2, kMessageAlignBytes, !fp8},
                            {"scale", args.quant_scale, sizeof(float), alignof(float), !fp8}};
  for (const Buffer& b : buffers) {
    if (b.p == nullptr) {
      if (b.may_be_null) continue;
      return Invalid(std::string(b.name) + " is NULL");
    }
    if (reinterpret_cast<uintptr_t>(b.p) % b.align != 0) {
      return Invalid(std::string(b.name) + " (" + Address(b.p) + ") is not " +
                     std::to_string(b.align) + "-byte aligned");
    }
  }
  if (bytes == 0) return OkStatus();
  for (size_t i = 0; i < std::size(buffers); ++i) {
    for (size_t j = i + 1; j < std::size(buffers); ++j) {
      const Buffer& a = buffers[i];
      const Buffer& b = buffers[j];
      if (a.p == nullptr || b.p == nullptr || !Overlap(a, b) || AllowedAlias(a, b)) continue;
      return Invalid(std::string(a.name) + " (" + Address(a.p) + ") and " + b.name + " (" +
                     Address(b.p) +
                     ") overlap (allowed: residual_out == in, residual_out == residual, "
                     "norm_out == in)");
    }
  }
  return OkStatus();
}

void ApplyHostResidualRmsNorm(const AllReduceCall& call) {
  kernels::ResidualRmsNormRows rows;
  rows.dtype = call.dtype;
  rows.tokens = static_cast<int64_t>(call.norm.tokens);
  rows.hidden = static_cast<int64_t>(call.norm.hidden);
  rows.eps = call.norm.eps;
  rows.reduced = static_cast<const uint16_t*>(call.out);
  rows.residual = static_cast<const uint16_t*>(call.norm.residual);
  rows.weight = static_cast<const uint16_t*>(call.norm.weight);
  rows.residual_out = static_cast<uint16_t*>(call.norm.residual_out);
  rows.norm_out = static_cast<uint16_t*>(call.out);
  if (call.norm.quant_out != nullptr) {
    rows.quant_out = static_cast<uint8_t*>(call.norm.quant_out);
    rows.quant_inv_scale = kernels::Fp8InverseScale(*call.norm.quant_scale);
  }
  kernels::ApplyResidualRmsNorm(rows, 0, rows.tokens);
}

}  // namespace qr
