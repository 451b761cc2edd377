// The premise of the data-flag two-shot path (kernels/gpu/two_shot.h): in
// wire layout v2 an INT4 or INT8 shard has no zero 32-bit code word and every
// scale half-word has kScaleWireFlag (bit 15) set, so a receiver that polls
// its words until none is zero and every scale has bit 15 has the whole
// shard. Checked here over the host reference's own wire bytes (phase 1 and
// phase 2, both of which the GPU codecs must reproduce bit for bit) for every
// kind of data the codecs treat specially. If a codec could ever emit a zero
// word the GPU would wait for it forever (bounded: a timeout), so this test
// must fail first.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/codec_layout.h"
#include "kernels/float16.h"
#include "kernels/geometry.h"
#include "kernels/test_data.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"

namespace qr::kernels {
namespace {

// Where a shard's wire breaks the premise, "" if nowhere.
std::string PremiseViolation(Codec codec, int ws, const std::vector<uint8_t>& wire) {
  const int64_t codes = ShardScaleOffset(codec, ws);
  for (int64_t off = 0; off < codes; off += 4) {
    uint32_t w;
    std::memcpy(&w, wire.data() + off, 4);
    if (w == 0) return "zero code word at byte " + std::to_string(off);
  }
  for (int64_t off = codes; off < ShardWireBytes(codec, ws); off += 2) {
    uint16_t s;
    std::memcpy(&s, wire.data() + off, 2);
    if ((s & kScaleWireFlag) == 0)
      return "scale word without the flag at byte " + std::to_string(off);
  }
  return "";
}

// Every special kind of value of `dtype`, in blocks of 32: zeros, tiny
// values and subnormals, +-max, inf, NaN, mixtures, and the adversarial
// blocks and random blocks of the codec tests.
std::vector<uint16_t> SpecialValues(DType dtype, uint64_t seed) {
  const bool bf16 = dtype == DType::kBFloat16;
  const uint16_t max = bf16 ? kBf16Max : kFp16Max;
  const uint16_t inf = InfBits(dtype);
  const uint16_t nan = CanonicalNaN(dtype);
  std::vector<uint16_t> v;
  auto block = [&](auto value_of) {
    for (int i = 0; i < kBlockElems; ++i) v.push_back(value_of(i));
  };
  block([](int) { return uint16_t{0}; });
  block([](int i) { return static_cast<uint16_t>(i % 2 ? 0x8000 : 0); });  // +-0
  block([](int i) { return static_cast<uint16_t>(1 + i); });               // subnormals
  block([](int i) { return static_cast<uint16_t>(i == 7 ? 1 : 0); });      // one subnormal
  block([&](int i) { return static_cast<uint16_t>(i % 2 ? max : max | 0x8000); });
  block([&](int i) { return static_cast<uint16_t>(i == 3 ? max : 1); });  // huge among tiny
  block([&](int i) { return static_cast<uint16_t>(i == 0 ? inf : 0x3C00); });
  block([&](int i) { return static_cast<uint16_t>(i == 31 ? inf | 0x8000 : 0); });
  block([&](int i) { return static_cast<uint16_t>(i == 5 ? nan : 0x3800); });
  block([&](int i) { return static_cast<uint16_t>(i % 3 ? nan | 0x8000 : inf); });
  block([&](int i) { return static_cast<uint16_t>(i == 9 ? 0x7FFF : 0); });  // NaN payload
  if (bf16) block([](int i) { return static_cast<uint16_t>(0x0100 + i); });  // below 2^-100
  for (const auto& b : testing::AdversarialBlocks(dtype)) v.insert(v.end(), b.begin(), b.end());
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> random(64 * kBlockElems);
  testing::FillRandomBlocks(dtype, rng, 0, random.data(), static_cast<int64_t>(random.size()));
  v.insert(v.end(), random.begin(), random.end());
  return v;
}

struct Case {
  Codec codec;
  int ws;
  WorkFormat format;
};

TwoShotParams ParamsFor(const Case& c, int64_t n) {
  TwoShotParams p;
  p.world_size = c.ws;
  p.codec = c.codec;
  p.dtype = WorkFormatDType(c.format);
  p.cast_bf16_to_fp16 = c.format == WorkFormat::kBf16Cast;
  p.num_elems = n;
  return p;
}

// Phase 1 (every rank's input shards) and phase 2 (the reduced shards) of
// every tile of an n-value call whose ranks hold `inputs`; the first
// violation, "" if none.
std::string CheckCall(const Case& c, const std::vector<std::vector<uint16_t>>& inputs, int64_t n) {
  const TwoShotParams p = ParamsFor(c, n);
  const size_t shard_bytes = static_cast<size_t>(ShardWireBytes(c.codec, c.ws));
  std::vector<std::vector<uint8_t>> wire(c.ws, std::vector<uint8_t>(shard_bytes));
  std::vector<uint8_t> reduced_wire(shard_bytes);
  std::vector<uint16_t> reduced(static_cast<size_t>(ShardElems(c.ws)));
  std::vector<const uint8_t*> received;
  for (const auto& w : wire) received.push_back(w.data());
  for (int64_t tile = 0; tile < NumTiles(n); ++tile) {
    for (int shard = 0; shard < c.ws; ++shard) {
      for (int r = 0; r < c.ws; ++r) {
        EncodeInputShard(p, inputs[r].data(), tile, shard, wire[r].data());
        const std::string v = PremiseViolation(c.codec, c.ws, wire[r]);
        if (!v.empty()) {
          return "phase 1 tile " + std::to_string(tile) + " shard " + std::to_string(shard) +
                 " rank " + std::to_string(r) + ": " + v;
        }
      }
      ReduceShard(p, received.data(), reduced.data());
      EncodeReducedShard(p, reduced.data(), reduced_wire.data());
      const std::string v = PremiseViolation(c.codec, c.ws, reduced_wire);
      if (!v.empty()) {
        return "phase 2 tile " + std::to_string(tile) + " shard " + std::to_string(shard) + ": " +
               v;
      }
    }
  }
  return "";
}

std::string Name(const Case& c) {
  return std::string(CodecName(c.codec)) + " ws" + std::to_string(c.ws) + " " +
         WorkFormatName(c.format);
}

std::vector<Case> Cases(std::initializer_list<Codec> codecs) {
  std::vector<Case> cases;
  for (Codec codec : codecs) {
    for (int ws : {2, 4, 8}) {
      if (!CodecRunsAtWorldSize(codec, ws)) continue;
      for (WorkFormat f : {WorkFormat::kFp16, WorkFormat::kBf16, WorkFormat::kBf16Cast}) {
        cases.push_back({codec, ws, f});
      }
    }
  }
  return cases;
}

// Each rank's input: the special values rotated by a rank-dependent number
// of blocks (so that every kind of block meets every other in the reduce,
// sums that overflow included), repeated to n values.
std::vector<std::vector<uint16_t>> Inputs(DType dtype, int ws, int64_t n, uint64_t seed) {
  const std::vector<uint16_t> special = SpecialValues(dtype, seed);
  const int64_t blocks = static_cast<int64_t>(special.size()) / kBlockElems;
  std::vector<std::vector<uint16_t>> in(ws, std::vector<uint16_t>(static_cast<size_t>(n)));
  for (int r = 0; r < ws; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = (i / kBlockElems + 3 * r) % blocks;
      in[r][i] = special[b * kBlockElems + i % kBlockElems];
    }
  }
  return in;
}

TEST(WireFlagPremiseTest, Int4AndInt8WireHasNoZeroWordAndEveryScaleFlagged) {
  for (const Case& c : Cases({Codec::kInt4, Codec::kInt8})) {
    const DType dtype = WorkFormatDType(c.format);
    // Two whole tiles, then a call whose last tile is one atom, and one
    // ending inside a block (the codec pads with +0).
    for (int64_t n : {2 * kTileElems, kTileElems + kAtomElems, int64_t{3} * kAtomElems}) {
      const std::string v = CheckCall(c, Inputs(dtype, c.ws, n, 17 + n), n);
      EXPECT_EQ(v, "") << Name(c) << " n=" << n;
    }
    // Every rank all zeros, and every rank all NaN.
    for (uint16_t fill : {uint16_t{0}, CanonicalNaN(dtype)}) {
      const std::vector<std::vector<uint16_t>> in(
          c.ws, std::vector<uint16_t>(static_cast<size_t>(kTileElems), fill));
      EXPECT_EQ(CheckCall(c, in, kTileElems), "") << Name(c) << " fill " << fill;
    }
  }
}

// The check above can fail: INT6's and INT3's low planes hold a zero word for
// a zero block (every code is Q, whose low bits are 0), which is why those
// codecs keep the block flags.
TEST(WireFlagPremiseTest, CheckSeesTheZeroWordsOfInt6AndInt3) {
  for (const Case& c : Cases({Codec::kInt6, Codec::kInt3})) {
    const std::vector<std::vector<uint16_t>> zeros(
        c.ws, std::vector<uint16_t>(static_cast<size_t>(kTileElems), 0));
    EXPECT_NE(CheckCall(c, zeros, kTileElems).find("zero code word"), std::string::npos) << Name(c);
  }
}

}  // namespace
}  // namespace qr::kernels
