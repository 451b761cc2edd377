// The bit shuffles of code_planes.h against the planes written one code at a
// time (the layout of kernels/codec.h): exhaustively where the input space
// allows, else over random and extreme codes.
#include "kernels/gpu/code_planes.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>

namespace qr::kernels::gpu {
namespace {

using Codes = std::array<uint32_t, 8>;

// The planes of an atom, one code at a time.
CodePlanes Reference(Codec codec, const Codes& u) {
  CodePlanes p;
  for (int j = 0; j < 8; ++j) {
    if (codec == Codec::kInt4) {
      p.lo |= u[j] << (4 * j);
    } else if (codec == Codec::kInt6) {
      p.lo |= (u[j] & 15u) << (4 * j);
      p.hi |= (u[j] >> 4) << (2 * j);
    } else {
      p.lo |= (u[j] & 3u) << (2 * j);
      p.hi |= (u[j] >> 2) << j;
    }
  }
  return p;
}

uint32_t Bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return a | (b << 8) | (c << 16) | (d << 24);
}

template <Codec kCodec>
void ExpectRoundTrip(const Codes& u) {
  const uint32_t even = Bytes(u[0], u[2], u[4], u[6]);
  const uint32_t odd = Bytes(u[1], u[3], u[5], u[7]);
  const CodePlanes want = Reference(kCodec, u);
  const CodePlanes got = CodeBytesToPlanes<kCodec>(even, odd);
  ASSERT_EQ(got.lo, want.lo) << u[0] << " " << u[1] << " " << u[7];
  ASSERT_EQ(got.hi, want.hi) << u[0] << " " << u[1] << " " << u[7];
  uint32_t back_even = 0, back_odd = 0;
  PlanesToCodeBytes<kCodec>(want.lo, want.hi, back_even, back_odd);
  ASSERT_EQ(back_even, even);
  ASSERT_EQ(back_odd, odd);
}

TEST(CodePlanesTest, HelpersOverTheirWholeInputs) {
  for (uint32_t x = 0; x < (1u << 16); ++x) {
    const uint32_t bytes = NibblesToBytes(x);
    for (int k = 0; k < 4; ++k) ASSERT_EQ((bytes >> (8 * k)) & 0xFFu, (x >> (4 * k)) & 15u);
    ASSERT_EQ(BytesToNibbles(bytes), x);
  }
  for (uint32_t x = 0; x < 256; ++x) {
    const uint32_t spread = EvenBitsToByteBit2(x);
    uint32_t want = 0;
    for (int k = 0; k < 4; ++k) want |= ((x >> (2 * k)) & 1u) << (8 * k + 2);
    ASSERT_EQ(spread, want) << x;
    ASSERT_EQ(ByteBit0ToEvenBits(spread >> 2), x & 0x55u) << x;
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

}  // namespace
}  // namespace qr::kernels::gpu
