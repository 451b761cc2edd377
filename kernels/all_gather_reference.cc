#include "kernels/all_gather_reference.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "kernels/codec.h"
#include "kernels/float16.h"

namespace qr::kernels {
namespace {

constexpr int ShardBlocks(int world_size) {
  return static_cast<int>(ShardElems(world_size) / kBlockElems);
}

}  // namespace

TwoShotParams AllGatherParamsFor(const TwoShotParams& p, Algorithm algorithm) {
  TwoShotParams q = p;
  if (algorithm == Algorithm::kOneShot) q.codec = Codec::kFp;
  return q;
}

DType AllGatherWorkDType(const TwoShotParams& p) {
  return p.codec == Codec::kFp ? p.dtype : WorkDType(p.dtype, p.cast_bf16_to_fp16);
}

void EncodeAllGatherShard(const TwoShotParams& p, const uint16_t* input, int64_t tile,
                          uint8_t* wire) {
  const DType work = AllGatherWorkDType(p);
  const bool cast = work != p.dtype;
  const int64_t first = CollectiveChunkOffset(tile, p.world_size);
  uint16_t block[kBlockElems];
  for (int sb = 0; sb < ShardBlocks(p.world_size); ++sb) {
    for (int j = 0; j < kBlockElems; ++j) {
      const int64_t i = first + int64_t{sb} * kBlockElems + j;
      const uint16_t v = i < p.num_elems ? input[i] : 0;
      block[j] = cast ? BFloat16ToHalf(v) : v;
    }
    EncodeShardBlock(p.codec, work, p.world_size, sb, block, wire);
  }
}

void DecodeAllGatherShard(const TwoShotParams& p, const uint8_t* wire, int64_t tile, int source,
                          uint16_t* output) {
  const DType work = AllGatherWorkDType(p);
  const bool cast_back = work != p.dtype;
  const int64_t first = CollectiveChunkOffset(tile, p.world_size);
  uint16_t* chunk = output + int64_t{source} * p.num_elems;
  float block[kBlockElems];
  for (int sb = 0; sb < ShardBlocks(p.world_size); ++sb) {
    const int64_t base = first + int64_t{sb} * kBlockElems;
    if (base >= p.num_elems) break;
    const int64_t n = std::min<int64_t>(kBlockElems, p.num_elems - base);
    if (p.codec == Codec::kFp) {
      // The wire holds the values themselves (kernels/codec.h): copy their
      // bits, never through a float, so NaN payloads survive.
      const uint8_t* in = wire + int64_t{sb} * kBlockElems * 2;
      for (int64_t j = 0; j < n; ++j) {
        chunk[base + j] = static_cast<uint16_t>(in[2 * j] | in[2 * j + 1] << 8);
      }
      continue;
    }
    DecodeShardBlock(p.codec, work, p.world_size, wire, sb, block);
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t w = FromFloat(work, block[j]);
      chunk[base + j] = cast_back ? HalfToBFloat16(w) : w;
    }
  }
}

Status ReferenceAllGather(const TwoShotParams& p, const uint16_t* const* inputs,
                          uint16_t* const* outputs) {
  QR_RETURN_IF_ERROR(ValidateTwoShotParams(p));
  const int ws = p.world_size;
  const int64_t shard_wire = ShardWireBytes(p.codec, ws);
  const int64_t tiles = CollectiveTiles(p.num_elems, ws);
  // Every input is encoded before any output is written (the in-place form
  // has rank r's input inside its output). wire[t * ws + source].
  std::vector<uint8_t> wire(static_cast<size_t>(tiles * ws * shard_wire));
  for (int64_t t = 0; t < tiles; ++t) {
    for (int src = 0; src < ws; ++src) {
      EncodeAllGatherShard(p, inputs[src], t, wire.data() + (t * ws + src) * shard_wire);
    }
  }
  for (int rank = 0; rank < ws; ++rank) {
    for (int64_t t = 0; t < tiles; ++t) {
      for (int src = 0; src < ws; ++src) {
        DecodeAllGatherShard(p, wire.data() + (t * ws + src) * shard_wire, t, src, outputs[rank]);
      }
    }
  }
  return OkStatus();
}

}  // namespace qr::kernels
