// The packed-fp16 codecs' device arithmetic (kernels/gpu/packed_codec.cuh)
// against their host definition (kernels/packed_codec.h), bit for bit, on
// the GPU: every fast-path block maximum with sampled values for the
// quantize, every scale word and code for the decode, every finite rank-0
// value against sampled rank-1 codes and scales for the fused reduce.
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/packed_codec.h"
#include "kernels/platform/gpu_api.h"
#include "tests/gpu/packed_codec_kernels.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

namespace packed = ::qr::kernels::packed;
using ::qr::kernels::FloatToHalf;
using ::qr::kernels::kFp16Max;

constexpr Codec kPackedCodecs[] = {Codec::kInt3, Codec::kInt4, Codec::kInt6};
constexpr uint16_t kMaxFinite = 0x7BFF;

uint32_t Pair(uint16_t lo, uint16_t hi) { return lo | (static_cast<uint32_t>(hi) << 16); }
uint16_t Lo(uint32_t w) { return static_cast<uint16_t>(w & 0xFFFF); }
uint16_t Hi(uint32_t w) { return static_cast<uint16_t>(w >> 16); }

class PackedCodecGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::DeviceCount() == 0) GTEST_SKIP() << "needs a GPU, found none";
  }
};

TEST_F(PackedCodecGpuTest, QuantizeIsTheHostsCodeForEveryFastPathBlockMaximum) {
  std::mt19937 rng(1802);
  for (Codec codec : kPackedCodecs) {
    const packed::AbsmaxRange range = packed::FastPathAbsmax(codec);
    std::vector<uint32_t> x, e, want;
    for (uint32_t a = range.first; a <= range.last; ++a) {
      const float m = packed::EncodeMultiplier(codec, static_cast<uint16_t>(a));
      const uint16_t m_bits = FloatToHalf(m);
      for (int i = 0; i < 16; ++i) {
        uint16_t v[2];
        for (uint16_t& h : v) {
          h = static_cast<uint16_t>(rng() % (a + 1)) | ((rng() & 1) ? 0x8000 : 0);
        }
        if (i == 0) v[0] = static_cast<uint16_t>(a), v[1] = static_cast<uint16_t>(a | 0x8000);
        x.push_back(Pair(v[0], v[1]));
        e.push_back(Pair(m_bits, m_bits));
        want.push_back(Pair(static_cast<uint16_t>(packed::Quantize(codec, v[0], m)),
                            static_cast<uint16_t>(packed::Quantize(codec, v[1], m))));
      }
    }
    std::vector<uint32_t> got(x.size());
    ASSERT_OK(RunPackedOp(PackedOp::kQuantize, CodecBits(codec), x.data(), e.data(), nullptr,
                          got.data(), x.size()));
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (got[i] != want[i] && bad++ < 5) {
        ADD_FAILURE() << CodecName(codec) << " x=" << std::hex << x[i] << " e=" << e[i] << " got "
                      << got[i] << " want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0u) << CodecName(codec) << " of " << x.size();
  }
}

// Every scale word a block can have: d~ grows with the block maximum, so the
// largest is that of a = 65504 (about 2^s * 65504 / K, where no decoded value
// overflows); larger words are never sent.
// The kernels' per-block multiplier and scale word (kernels/gpu/packed_scale.h,
// fp32 divisions on the device) for every finite positive block maximum.
TEST_F(PackedCodecGpuTest, MultiplierAndScaleWordAreTheHostsForEveryBlockMaximum) {
  for (Codec codec : kPackedCodecs) {
    std::vector<uint32_t> a, want_e, want_d;
    for (uint32_t h = 1; h <= kMaxFinite; ++h) {
      a.push_back(h);
      const float e = packed::EncodeMultiplier(codec, static_cast<uint16_t>(h));
      want_e.push_back(kernels::FloatBits(e));
      want_d.push_back(packed::ScaleWord(codec, e));
    }
    std::vector<uint32_t> got_e(a.size()), got_d(a.size());
    ASSERT_OK(RunPackedOp(PackedOp::kMultiplier, CodecBits(codec), a.data(), a.data(), nullptr,
                          got_e.data(), a.size()));
    ASSERT_OK(RunPackedOp(PackedOp::kScaleWord, CodecBits(codec), a.data(), a.data(), nullptr,
                          got_d.data(), a.size()));
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(got_e[i], want_e[i]) << "codec bits " << CodecBits(codec) << " a " << a[i];
      ASSERT_EQ(got_d[i], want_d[i]) << "codec bits " << CodecBits(codec) << " a " << a[i];
    }
  }
}

TEST_F(PackedCodecGpuTest, DecodeIsTheHostsForEveryScaleWordAndCode) {
  for (Codec codec : kPackedCodecs) {
    const int q = kernels::CodeBias(codec);
    const uint16_t largest = packed::ScaleWord(codec, packed::EncodeMultiplier(codec, kMaxFinite));
    std::vector<uint32_t> codes, scales, want;
    for (uint32_t d = 0; d <= largest; ++d) {
      for (int u = 1; u <= 2 * q - 1; ++u) {
        const int other = 2 * q - u;
        codes.push_back(Pair(static_cast<uint16_t>(u), static_cast<uint16_t>(other)));
        scales.push_back(Pair(static_cast<uint16_t>(d), static_cast<uint16_t>(d)));
        want.push_back(Pair(packed::Decode(codec, u, static_cast<uint16_t>(d)),
                            packed::Decode(codec, other, static_cast<uint16_t>(d))));
      }
    }
    std::vector<uint32_t> got(codes.size());
    ASSERT_OK(RunPackedOp(PackedOp::kDecode, CodecBits(codec), codes.data(), scales.data(), nullptr,
                          got.data(), codes.size()));
    size_t bad = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      if (got[i] != want[i] && bad++ < 5) {
        ADD_FAILURE() << CodecName(codec) << " codes=" << std::hex << codes[i]
                      << " scale=" << scales[i] << " got " << got[i] << " want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0u) << CodecName(codec) << " of " << codes.size();
  }
}

// Where the exact sum is beyond ±65504 the hardware gives ±inf and the
// definition saturates: those words are the slow path's, counted, and must
// be exactly those.
TEST_F(PackedCodecGpuTest, FusedReduceIsTheHostsExceptWhereItWouldOverflow) {
  std::mt19937 rng(1803);
  for (Codec codec : kPackedCodecs) {
    const int q = kernels::CodeBias(codec);
    std::vector<uint32_t> codes, scales, decoded, want;
    for (int trial = 0; trial < 24; ++trial) {
      const int u1 = trial == 0 ? 2 * q - 1 : 1 + static_cast<int>(rng() % (2 * q - 1));
      const uint16_t d1 = trial == 0 ? kMaxFinite : static_cast<uint16_t>(rng() % kMaxFinite);
      for (uint32_t x0 = 0; x0 <= 0xFBFF; x0 += 2) {
        if ((x0 & 0x7FFF) >= kMaxFinite) continue;
        const uint16_t lo = static_cast<uint16_t>(x0), hi = static_cast<uint16_t>(x0 + 1);
        codes.push_back(Pair(static_cast<uint16_t>(u1), static_cast<uint16_t>(2 * q - u1)));
        scales.push_back(Pair(d1, d1));
        decoded.push_back(Pair(lo, hi));
        want.push_back(Pair(packed::FusedReduce(codec, u1, d1, lo),
                            packed::FusedReduce(codec, 2 * q - u1, d1, hi)));
      }
    }
    std::vector<uint32_t> got(codes.size());
    ASSERT_OK(RunPackedOp(PackedOp::kFusedReduce, CodecBits(codec), codes.data(), scales.data(),
                          decoded.data(), got.data(), codes.size()));
    size_t bad = 0, overflowed = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      for (int half = 0; half < 2; ++half) {
        const uint16_t g = half ? Hi(got[i]) : Lo(got[i]);
        const uint16_t w = half ? Hi(want[i]) : Lo(want[i]);
        if (g == w) continue;
        if ((w & 0x7FFF) == kFp16Max && (g & 0x7FFF) == kernels::kFp16Inf &&
            (g & 0x8000) == (w & 0x8000)) {
          ++overflowed;
          continue;
        }
        if (bad++ < 5) {
          ADD_FAILURE() << CodecName(codec) << " codes=" << std::hex << codes[i]
                        << " scale=" << scales[i] << " x0=" << decoded[i] << " got " << g
                        << " want " << w;
        }
      }
    }
    EXPECT_EQ(bad, 0u) << CodecName(codec) << " of " << 2 * codes.size();
    EXPECT_GT(overflowed, 0u) << CodecName(codec) << ": the largest scale word must overflow";
    std::cout << CodecName(codec) << ": " << 2 * codes.size() << " reduces, " << overflowed
              << " beyond 65504 (the slow path's)\n";
  }
}

}  // namespace
}  // namespace qr::testing
