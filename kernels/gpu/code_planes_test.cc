// The bit shuffles of code_planes.h against the planes of wire layout v2
// (docs/codecs.md section 2) written one code at a time: exhaustively where
// the input space allows, else over random and extreme codes.
#include "kernels/gpu/code_planes.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/codec.h"
#include "kernels/codec_layout.h"
#include "kernels/geometry.h"

namespace qr::kernels::gpu {
namespace {

using Codes = std::array<uint32_t, 8>;

// The planes of an atom, one code at a time, as the layout states them: code
// j = 2m + p (p = 0 even, 1 odd) of the atom.
CodePlanes Reference(Codec codec, const Codes& u) {
  CodePlanes planes;
  for (int j = 0; j < 8; ++j) {
    const int m = j / 2, p = j % 2;
    if (codec == Codec::kInt4) {
      planes.lo |= u[j] << (16 * p + 4 * m);
    } else if (codec == Codec::kInt6) {
      planes.lo |= (u[j] & 15u) << (16 * p + 4 * m);
      planes.hi |= (u[j] >> 4) << (8 * p + 2 * m);
    } else {
      planes.lo |= (u[j] & 3u) << (8 * p + 2 * m);
      planes.hi |= (u[j] >> 2) << (4 * p + m);
    }
  }
  return planes;
}

template <Codec kCodec>
void ExpectRoundTrip(const Codes& u) {
  uint32_t pairs[4];
  for (int m = 0; m < 4; ++m) pairs[m] = u[2 * m] | (u[2 * m + 1] << 16);
  const CodePlanes want = Reference(kCodec, u);
  const CodePlanes got = PairsToPlanes<kCodec>(pairs);
  ASSERT_EQ(got.lo, want.lo) << u[0] << " " << u[1] << " " << u[7];
  ASSERT_EQ(got.hi, want.hi) << u[0] << " " << u[1] << " " << u[7];
  const CodePlanes spread = SpreadPlanes<kCodec>(want);
  for (int m = 0; m < 4; ++m) ASSERT_EQ(PairOf<kCodec>(spread, m), pairs[m]) << m;
}

TEST(CodePlanesTest, ByteMovesOverTheirWholeInputs) {
  for (uint32_t x = 0; x < (1u << 16); ++x) {
    ASSERT_EQ(Bytes02To01(Bytes01To02(x)), x);
    ASSERT_EQ(Bytes01To02(x), (x & 0xFFu) | ((x >> 8) << 16));
  }
}

// INT3 codes span 1..7 (a symmetric range around 4); every atom of them.
TEST(CodePlanesTest, Int3EveryAtom) {
  Codes u{};
  for (uint32_t n = 0; n < 5764801u; ++n) {  // 7^8
    uint32_t rest = n;
    for (int j = 0; j < 8; ++j) {
      u[j] = 1 + rest % 7;
      rest /= 7;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectRoundTrip<Codec::kInt3>(u));
  }
}

// INT4 (1..15) and INT6 (1..63): random atoms, all-minimum and all-maximum,
// and each position at the extremes alone.
TEST(CodePlanesTest, Int4AndInt6) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    Codes u4{}, u6{};
    for (int j = 0; j < 8; ++j) {
      u4[j] = 1 + rng() % 15;
      u6[j] = 1 + rng() % 63;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectRoundTrip<Codec::kInt4>(u4));
    ASSERT_NO_FATAL_FAILURE(ExpectRoundTrip<Codec::kInt6>(u6));
  }
  for (uint32_t top : {15u, 63u}) {
    for (int j = -1; j < 8; ++j) {
      Codes lo{}, hi{};
      lo.fill(1);
      hi.fill(top);
      if (j >= 0) {
        lo[j] = top;
        hi[j] = 1;
      }
      if (top == 15) {
        ExpectRoundTrip<Codec::kInt4>(lo);
        ExpectRoundTrip<Codec::kInt4>(hi);
      } else {
        ExpectRoundTrip<Codec::kInt6>(lo);
        ExpectRoundTrip<Codec::kInt6>(hi);
      }
    }
  }
}

// Against the host reference's encoder (kernels/codec.h PackBlock): a shard
// of random codes written block by block, read back the way a GPU thread
// does (its contiguous plane pieces and its block's scale words,
// kernels/gpu/int_wire.cuh IntLayout), every thread and atom row.
template <Codec kCodec>
void ExpectHostShardReadsBack(int ws, std::mt19937& rng) {
  const int rows = ShardAtomRows(ws);
  const int blocks = rows * kAtomRowBlocks;
  const int q = CodeBias(kCodec);
  std::vector<uint8_t> codes(static_cast<size_t>(blocks) * kBlockElems);
  std::vector<uint16_t> scales(blocks);
  std::vector<uint8_t> wire(ShardWireBytes(kCodec, ws), 0);
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < kBlockElems; ++i) codes[b * kBlockElems + i] = 1 + rng() % (2 * q - 1);
    scales[b] = static_cast<uint16_t>(rng() % 0x7C01);
    PackBlock(kCodec, ws, b, &codes[b * kBlockElems], scales[b], wire.data());
  }
  const int lb = LowPlaneAtomBytes(kCodec), hb = HighPlaneAtomBytes(kCodec);
  auto read = [&](int64_t off, int bytes) {
    uint32_t v = 0;
    std::memcpy(&v, &wire[off], bytes);  // little-endian, as the GPU
    return v;
  };
  for (int t = 0; t < kAtomRowAtoms; ++t) {
    for (int k = 0; k < rows; ++k) {
      const int value0 = k * kAtomRowElems + t * kAtomElems;  // value 0 of atom (k, t)
      const uint8_t* u = &codes[value0];
      const int b = t / kAtomsPerBlock;
      const uint32_t scale = read(ShardScaleOffset(kCodec, ws) + (b * rows + k) * 2, 2);
      ASSERT_EQ(scale, scales[value0 / kBlockElems] | kScaleWireFlag) << t << " " << k;
      const int64_t lo_off = static_cast<int64_t>(t) * lb * rows + k * lb;
      if constexpr (kCodec == Codec::kInt8) {
        for (int j = 0; j < 8; ++j) ASSERT_EQ(wire[lo_off + j], u[j]) << t << " " << k;
      } else {
        CodePlanes planes;
        planes.lo = read(lo_off, lb);
        planes.hi = read(
            ShardHighPlaneOffset(kCodec, ws) + static_cast<int64_t>(t) * hb * rows + k * hb, hb);
        uint32_t pairs[4];
        for (int m = 0; m < 4; ++m) pairs[m] = u[2 * m] | (uint32_t{u[2 * m + 1]} << 16);
        const CodePlanes spread = SpreadPlanes<kCodec>(planes);
        for (int m = 0; m < 4; ++m) ASSERT_EQ(PairOf<kCodec>(spread, m), pairs[m]) << t << " " << k;
        const CodePlanes built = PairsToPlanes<kCodec>(pairs);
        ASSERT_EQ(built.lo, planes.lo) << t << " " << k;
        ASSERT_EQ(built.hi, planes.hi) << t << " " << k;
      }
    }
  }
}

TEST(CodePlanesTest, HostEncoderShardsReadBackAsTheGpuReadsThem) {
  std::mt19937 rng(18);
  for (int ws : {2, 4, 8}) {
    ASSERT_NO_FATAL_FAILURE(ExpectHostShardReadsBack<Codec::kInt8>(ws, rng));
    ASSERT_NO_FATAL_FAILURE(ExpectHostShardReadsBack<Codec::kInt6>(ws, rng));
    ASSERT_NO_FATAL_FAILURE(ExpectHostShardReadsBack<Codec::kInt4>(ws, rng));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectHostShardReadsBack<Codec::kInt3>(2, rng));
}

}  // namespace
}  // namespace qr::kernels::gpu
