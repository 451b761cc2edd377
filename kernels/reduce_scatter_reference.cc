#include "kernels/reduce_scatter_reference.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "kernels/codec.h"
#include "kernels/float16.h"

namespace qr::kernels {

TwoShotParams ReduceScatterParamsFor(const TwoShotParams& p, Algorithm algorithm) {
  TwoShotParams q = p;
  if (algorithm == Algorithm::kOneShot) {
    q.codec = Codec::kFp;
    q.cast_bf16_to_fp16 = false;
  }
  return q;
}

void EncodeReduceScatterShard(const TwoShotParams& p, const uint16_t* input, int64_t tile,
                              int shard, uint8_t* wire) {
  const DType work = WorkDType(p.dtype, p.cast_bf16_to_fp16);
  const bool cast = work != p.dtype;
  const int64_t first = CollectiveChunkOffset(tile, p.world_size);
  const uint16_t* chunk = input + int64_t{shard} * p.num_elems;
  const int blocks = static_cast<int>(ShardElems(p.world_size) / kBlockElems);
  uint16_t block[kBlockElems];
  for (int sb = 0; sb < blocks; ++sb) {
    for (int j = 0; j < kBlockElems; ++j) {
      const int64_t i = first + int64_t{sb} * kBlockElems + j;
      const uint16_t v = i < p.num_elems ? chunk[i] : 0;
      block[j] = cast ? BFloat16ToHalf(v) : v;
    }
    EncodeShardBlock(p.codec, work, p.world_size, sb, block, wire);
  }
}

void WriteReduceScatterShard(const TwoShotParams& p, const uint16_t* reduced, int64_t tile,
                             uint16_t* output) {
  const bool cast_back = WorkDType(p.dtype, p.cast_bf16_to_fp16) != p.dtype;
  const int64_t first = CollectiveChunkOffset(tile, p.world_size);
  const int64_t n = std::min<int64_t>(ShardElems(p.world_size), p.num_elems - first);
  for (int64_t i = 0; i < n; ++i) {
    output[first + i] = cast_back ? HalfToBFloat16(reduced[i]) : reduced[i];
  }
}

Status ReferenceReduceScatter(const TwoShotParams& p, const uint16_t* const* inputs,
                              uint16_t* const* outputs) {
  QR_RETURN_IF_ERROR(ValidateTwoShotParams(p));
  const int ws = p.world_size;
  const int64_t shard_wire = ShardWireBytes(p.codec, ws);
  const int64_t tiles = CollectiveTiles(p.num_elems, ws);
  // Every rank's whole input is encoded before any output is written, so
  // the in-place form (output inside the input) reads only original values.
  // wire[(tile * ws + owner) * ws + source] = what source sent owner.
  std::vector<uint8_t> wire(static_cast<size_t>(tiles * ws * ws * shard_wire));
  for (int64_t t = 0; t < tiles; ++t) {
    for (int owner = 0; owner < ws; ++owner) {
      for (int src = 0; src < ws; ++src) {
        EncodeReduceScatterShard(p, inputs[src], t, owner,
                                 wire.data() + ((t * ws + owner) * ws + src) * shard_wire);
      }
    }
  }
  std::vector<uint16_t> reduced(static_cast<size_t>(ShardElems(ws)));
  std::vector<const uint8_t*> received(static_cast<size_t>(ws));
  for (int64_t t = 0; t < tiles; ++t) {
    for (int owner = 0; owner < ws; ++owner) {
      for (int src = 0; src < ws; ++src) {
        received[src] = wire.data() + ((t * ws + owner) * ws + src) * shard_wire;
      }
      ReduceShard(p, received.data(), reduced.data());
      WriteReduceScatterShard(p, reduced.data(), t, outputs[owner]);
    }
  }
  return OkStatus();
}

}  // namespace qr::kernels
