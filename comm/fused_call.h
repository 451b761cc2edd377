// The fused all-reduce + residual add + RMSNorm request
// (Collective::kAllReduceResidualRmsNorm, docs/fused.md): the argument
// checks every backend relies on, made before anything runs, and the
// epilogue as the host backend runs it after its all-reduce.
#ifndef QR_COMM_FUSED_CALL_H_
#define QR_COMM_FUSED_CALL_H_

#include <cstddef>
#include <cstdint>

#include "comm/backend.h"
#include "common/status.h"

namespace qr {

// kInvalidArgument, naming the buffer and its address, unless: in, weight,
// residual_out and norm_out are non-NULL (residual may be NULL); hidden > 0
// and a multiple of 8 (rows of 16 bytes); tokens * hidden * 2 does not
// overflow and is at most max_bytes; every non-NULL pointer is 16-byte
// aligned; and the buffers are pairwise disjoint except residual_out == in,
// residual_out == residual and norm_out == in. The FP8 output: quant_out
// and quant_scale both or neither, quant_out (tokens x hidden bytes)
// 16-byte and the scale 4-byte aligned, both disjoint from every buffer.
// tokens == 0 passes (the caller's no-op).
[[nodiscard]] Status CheckResidualRmsNormArgs(const void* in, void* norm_out,
                                              const ResidualRmsNormArgs& args, uint64_t max_bytes);

// The epilogue (kernels/rmsnorm_reference.h) on host memory, for a call
// whose all-reduce already wrote call.out (norm_out).
void ApplyHostResidualRmsNorm(const AllReduceCall& call);

}  // namespace qr

#endif  // QR_COMM_FUSED_CALL_H_
