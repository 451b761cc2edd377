// Communicator::ReduceScatter and ::AllGather: the arguments' checks and the
// request (comm/backend.h AllReduceCall with its collective), which runs on
// the same path as the all-reduce (Communicator::Submit). docs/collectives.md
// is the user's description.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "comm/backend.h"
#include "comm/communicator.h"
#include "comm/policy.h"
#include "common/limits.h"
#include "common/status_macros.h"

namespace qr {
namespace {

std::string Address(const void* p) {
  char text[2 + 2 * sizeof(uintptr_t) + 1];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return text;
}

// What a call names, before any backend sees it.
struct Shape {
  const char* name;  // "reduce_scatter" / "all_gather"
  const void* in;
  const void* out;
  uint64_t in_bytes;
  uint64_t out_bytes;
  // The one overlap allowed: the in-place form, `small` (the per-rank
  // buffer) at `large` + rank * count.
  const void* in_place_small;
  const void* in_place_large;
  uint64_t in_place_offset;
};

// Both backends refuse the same pointers before anything runs (a GPU kernel
// on a misaligned address faults the context; an overlap other than the
// in-place one would have ranks read values their own output overwrote).
Status CheckPointers(const Shape& s) {
  for (const auto& [what, p] : {std::pair<const char*, const void*>{"in", s.in}, {"out", s.out}}) {
    if (reinterpret_cast<uintptr_t>(p) % kMessageAlignBytes != 0) {
      return InvalidArgumentError(std::string(s.name) + ": " + what + " (" + Address(p) +
                                  ") is not 16-byte aligned");
    }
  }
  const uintptr_t x = reinterpret_cast<uintptr_t>(s.in);
  const uintptr_t y = reinterpret_cast<uintptr_t>(s.out);
  // Overflow-free form of "[x, x + in_bytes) and [y, y + out_bytes) meet".
  const bool overlap = x < y ? y - x < s.in_bytes : x - y < s.out_bytes;
  const bool in_place = reinterpret_cast<uintptr_t>(s.in_place_small) ==
                        reinterpret_cast<uintptr_t>(s.in_place_large) + s.in_place_offset;
  if (overlap && !in_place) {
    return InvalidArgumentError(
        std::string(s.name) + ": in (" + Address(s.in) + ", " + std::to_string(s.in_bytes) +
        " bytes) and out (" + Address(s.out) + ", " + std::to_string(s.out_bytes) +
        " bytes) overlap, and not as the in-place form (the per-rank buffer at the whole one + " +
        std::to_string(s.in_place_offset) + " bytes)");
  }
  return OkStatus();
}

// The checks and the request of one reduce-scatter or all-gather; on success
// *call is ready for Submit and *bytes is the whole message's size.
Status BuildCollectiveCall(const Communicator& c, Collective collective, const void* in, void* out,
                           size_t count, DType dtype, Regime regime, bool cast, void* stream,
                           AllReduceCall* call, uint64_t* bytes) {
  const bool rs = collective == Collective::kReduceScatter;
  const char* name = rs ? "reduce_scatter" : "all_gather";
  const int ws = c.world_size();
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return InvalidArgumentError(std::string(name) + ": dtype must be fp16 or bf16");
  }
  if (regime == Regime::kNone) {
    return UnsupportedError(std::string(name) +
                            ": regime NONE declines quick-reduce (pass FP, INT8, INT6, INT4 or "
                            "INT3)");
  }
  if (!CodecRunsAtWorldSize(CodecForRegime(regime), ws)) {
    return UnsupportedError(std::string(name) + ": INT3 needs world size 2, this group has " +
                            std::to_string(ws));
  }
  if (in == nullptr || out == nullptr) {
    return InvalidArgumentError(std::string(name) + ": " + (in == nullptr ? "in" : "out") +
                                " is NULL");
  }
  constexpr size_t kElemBytes = 2;
  if (count > std::numeric_limits<size_t>::max() / kElemBytes / static_cast<size_t>(ws)) {
    return InvalidArgumentError(std::string(name) + ": count " + std::to_string(count) +
                                " overflows");
  }
  const uint64_t shard = count * kElemBytes;
  const uint64_t whole = shard * static_cast<uint64_t>(ws);
  if (!IsWholeMessageUnits(shard)) {
    return InvalidArgumentError(std::string(name) + ": a shard of " + std::to_string(shard) +
                                " bytes is not a multiple of 16 bytes");
  }
  if (whole > static_cast<uint64_t>(c.config().max_size_bytes)) {
    return InvalidArgumentError(std::string(name) + ": message of " + std::to_string(whole) +
                                " bytes exceeds the maximum of " +
                                std::to_string(c.config().max_size_bytes) +
                                " bytes (QR_MAX_SIZE_BYTES_MB)");
  }
  const uint64_t offset = shard * static_cast<uint64_t>(c.rank());
  Shape s{name,          in,    out, rs ? whole : shard, rs ? shard : whole, rs ? out : in,
          rs ? in : out, offset};
  QR_RETURN_IF_ERROR(CheckPointers(s));

  call->in = in;
  call->out = out;
  call->count = count;
  call->dtype = dtype;
  call->codec = CodecForRegime(regime);
  call->cast_bf16_to_fp16 = cast && dtype == DType::kBFloat16;
  call->stream = stream;
  call->collective = collective;
  // The all-reduce's rule for the whole message, on every rank and backend.
  call->algorithm = ChooseAlgorithm(c.config(), whole, ws,
                                    WorkFormatOf(dtype, call->cast_bf16_to_fp16), call->codec);
  *bytes = whole;
  return OkStatus();
}

}  // namespace

Status Communicator::ReduceScatter(const void* in, void* out, size_t recvcount, DType dtype,
                                   Regime regime, bool cast_bf16_to_fp16, void* stream) {
  if (recvcount == 0) return OkStatus();
  AllReduceCall call;
  uint64_t bytes = 0;
  QR_RETURN_IF_ERROR(BuildCollectiveCall(*this, Collective::kReduceScatter, in, out, recvcount,
                                         dtype, regime, cast_bf16_to_fp16, stream, &call, &bytes));
  return Submit(call, bytes);
}

Status Communicator::AllGather(const void* in, void* out, size_t sendcount, DType dtype,
                               Regime regime, bool cast_bf16_to_fp16, void* stream) {
  if (sendcount == 0) return OkStatus();
  AllReduceCall call;
  uint64_t bytes = 0;
  QR_RETURN_IF_ERROR(BuildCollectiveCall(*this, Collective::kAllGather, in, out, sendcount, dtype,
                                         regime, cast_bf16_to_fp16, stream, &call, &bytes));
  return Submit(call, bytes);
}

}  // namespace qr
