// Device codecs for the two-shot kernel, in wire layout v2 (docs/codecs.md
// section 2). A codec C<kBf16, kA> moves one thread's share of one rank
// shard (kA atoms of 8 values) to and from the wire:
//   Wire                     this thread's wire words of the shard, in registers
//   kShardWireBytes          wire bytes of one whole shard (all threads)
//   Encode(raw[kA], tid)     the Wire of this thread's atoms (collective
//                            over the warp: block maxima, votes)
//   EncodeInput<kIn>(in[kA], tid) Encode of input atoms in kIn's input
//                            format (the bf16 cast converts here)
//   Store(w, dst, tid)       this thread's bytes of the shard at dst; every
//                            thread stores its own words straight to the
//                            destination (no staging)
//   Load(src, tid)           the Wire back from a received shard
//   Reduce<ws>(src[ws], out[kA]) the rank-order reduce of the sources' Wires
//                            (atom by atom: one atom's sum live at a time)
//   DecodeOut<kOut>(w, sink) the shard's values in kOut's output format:
//                            sink(k, atom) for k = 0..kA-1, one atom live
//                            at a time
//   kOverlapNextTile         whether the kernel sends the next tile's phase 1
//                            before waiting for this tile's phase 2
// Values are the math format (fp16 or bf16 bit patterns, kBf16 says which).
// Since the kernel can decode a Wire from its registers as well as from the
// wire, the owner of a shard never sends it to itself.
#ifndef QR_KERNELS_GPU_CODECS_CUH_
#define QR_KERNELS_GPU_CODECS_CUH_

#include <type_traits>

#include "kernels/codec_layout.h"
#include "kernels/gpu/fp_codec.cuh"
#include "kernels/gpu/int_codec_fp32.cuh"
#include "kernels/gpu/int_codec_packed.cuh"

namespace qr::kernels::gpu {

// The integer codec of a work dtype: packed for INT6/INT4/INT3 on fp16.
template <Codec kCodec, bool kBf16, int kA>
using IntegerCodec =
    std::conditional_t<UsesPackedArithmetic(kCodec, kBf16 ? DType::kBFloat16 : DType::kFloat16),
                       PackedCodec<kCodec, kA>, IntCodec<kCodec, kBf16, kA>>;

template <bool kBf16, int kA>
using Int8Codec = IntegerCodec<Codec::kInt8, kBf16, kA>;
template <bool kBf16, int kA>
using Int6Codec = IntegerCodec<Codec::kInt6, kBf16, kA>;
template <bool kBf16, int kA>
using Int4Codec = IntegerCodec<Codec::kInt4, kBf16, kA>;
template <bool kBf16, int kA>
using Int3Codec = IntegerCodec<Codec::kInt3, kBf16, kA>;

}  // namespace qr::kernels::gpu

#endif  // QR_KERNELS_GPU_CODECS_CUH_
