#include "comm/host_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/limits.h"
#include "common/status_macros.h"
#include "kernels/all_gather_reference.h"
#include "kernels/reduce_scatter_reference.h"

namespace qr {
namespace {

namespace k = ::qr::kernels;

k::TwoShotParams ParamsOf(const HostExchange& x, const AllReduceCall& call) {
  k::TwoShotParams p;
  p.world_size = x.world_size();
  p.codec = call.codec;
  p.dtype = call.dtype;
  p.cast_bf16_to_fp16 = call.cast_bf16_to_fp16;
  p.num_elems = static_cast<int64_t>(call.count);
  return p;
}

Status RunReduceScatter(HostExchange& x, const k::TwoShotParams& p, const uint16_t* in,
                        uint16_t* out, uint64_t desc, int64_t num_slots) {
  const int ws = x.world_size();
  const int me = x.rank();
  const int64_t tiles = k::CollectiveTiles(p.num_elems, ws);
  std::vector<uint16_t> reduced(static_cast<size_t>(k::ShardElems(ws)));
  const uint8_t* received[kMaxWorldSize];
  for (int64_t t0 = 0; t0 < tiles; t0 += num_slots) {
    const int64_t batch = std::min(num_slots, tiles - t0);
    const uint64_t colour = x.NextRound();
    for (int64_t i = 0; i < batch; ++i) {
      for (int s = 0; s < ws; ++s) {
        k::EncodeReduceScatterShard(p, in, t0 + i, s, x.RecvSlot(s, i, 0, me));
      }
    }
    QR_RETURN_IF_ERROR(x.Sync(0, colour, desc));
    // Every input value of this round was encoded before the first output
    // is written: the in-place form (out inside in) reads originals only.
    for (int64_t i = 0; i < batch; ++i) {
      for (int s = 0; s < ws; ++s) received[s] = x.RecvSlot(me, i, 0, s);
      k::ReduceShard(p, received, reduced.data());
      k::WriteReduceScatterShard(p, reduced.data(), t0 + i, out);
    }
    QR_RETURN_IF_ERROR(x.Sync(1, colour, desc));
  }
  return OkStatus();
}

Status RunAllGather(HostExchange& x, const k::TwoShotParams& p, const uint16_t* in, uint16_t* out,
                    uint64_t desc, int64_t num_slots) {
  const int ws = x.world_size();
  const int me = x.rank();
  const int64_t tiles = k::CollectiveTiles(p.num_elems, ws);
  const int64_t wire_bytes = k::ShardWireBytes(p.codec, ws);
  for (int64_t t0 = 0; t0 < tiles; t0 += num_slots) {
    const int64_t batch = std::min(num_slots, tiles - t0);
    const uint64_t colour = x.NextRound();
    QR_RETURN_IF_ERROR(x.Sync(0, colour, desc));
    for (int64_t i = 0; i < batch; ++i) {
      uint8_t* mine = x.RecvSlot(me, i, 1, me);
      k::EncodeAllGatherShard(p, in, t0 + i, mine);
      for (int s = 0; s < ws; ++s) {
        if (s != me) std::memcpy(x.RecvSlot(s, i, 1, me), mine, static_cast<size_t>(wire_bytes));
      }
    }
    QR_RETURN_IF_ERROR(x.Sync(1, colour, desc));
    for (int64_t i = 0; i < batch; ++i) {
      for (int s = 0; s < ws; ++s)
        k::DecodeAllGatherShard(p, x.RecvSlot(me, i, 1, s), t0 + i, s, out);
    }
  }
  return OkStatus();
}

}  // namespace

Status RunHostCollective(HostExchange& x, const AllReduceCall& call, uint64_t desc,
                         int64_t num_slots) {
  const auto* in = static_cast<const uint16_t*>(call.in);
  auto* out = static_cast<uint16_t*>(call.out);
  const k::TwoShotParams p = ParamsOf(x, call);
  QR_RETURN_IF_ERROR(k::ValidateTwoShotParams(p));
  switch (call.collective) {
    case Collective::kReduceScatter:
      return RunReduceScatter(x, k::ReduceScatterParamsFor(p, call.algorithm), in, out, desc,
                              num_slots);
    case Collective::kAllGather:
      return RunAllGather(x, k::AllGatherParamsFor(p, call.algorithm), in, out, desc, num_slots);
    default:
      return InternalError("host backend: collective " +
                           std::to_string(static_cast<int>(call.collective)) +
                           " is not a reduce-scatter or an all-gather");
  }
}

}  // namespace qr
