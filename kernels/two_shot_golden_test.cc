// Pins the exact bits of the host reference: for every format, a digest of
// rank 0's output VALUES and a digest of every wire byte of the call (each
// rank's phase-1 encodings, each owner's phase-2 encoding). The GPU kernels
// must reproduce the reference bit for bit, so any change to these digests
// changes the wire format or the arithmetic spec: it must come with
// docs/codecs.md and the GPU port updated, and be announced. Inputs come
// from a fixed xorshift generator (no std:: distributions, whose outputs are
// implementation-defined).
//
// History (two_shot_golden.inc):
// - Issue 18 (wire layout v2 and the packed-fp16 arithmetic) changed them
//   once. Output values changed only for the packed formats, INT3/INT4/INT6
//   on fp16 and on bf16 with the cast (14 entries); every other format (FP;
//   INT8 for every dtype; INT3/INT4/INT6 on bf16 without the cast) kept its
//   output digest from before, only its wire bytes moved (layout v2, scale
//   words flagged; FP's bytes did not change either). The wire digests are
//   new with that change.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/float16.h"
#include "kernels/two_shot_reference.h"

namespace qr::kernels {
namespace {

uint64_t Next(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Finite 16-bit values: a random sign and mantissa, exponents in a band chosen
// per block so that blocks differ in scale, plus some zeros.
std::vector<uint16_t> Inputs(DType dtype, int rank, int64_t n) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (rank + 1) + static_cast<int>(dtype);
  std::vector<uint16_t> v(n);
  int base = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 32 == 0) base = static_cast<int>(Next(s) % 20);
    const uint64_t r = Next(s);
    if (r % 17 == 0) {
      v[i] = 0;
      continue;
    }
    const uint16_t sign = (r >> 8) & 1 ? 0x8000 : 0;
    if (dtype == DType::kFloat16) {
      const uint16_t exp = static_cast<uint16_t>(1 + base + (r >> 16) % 10);  // 1..30
      v[i] = sign | (exp << 10) | ((r >> 32) & 0x3FF);
    } else {
      const uint16_t exp = static_cast<uint16_t>(100 + base + (r >> 16) % 10);
      v[i] = sign | (exp << 7) | ((r >> 32) & 0x7F);
    }
  }
  return v;
}

uint64_t Fnv1a(const uint16_t* p, int64_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int64_t i = 0; i < n; ++i) {
    h = (h ^ (p[i] & 0xFF)) * 0x100000001B3ull;
    h = (h ^ (p[i] >> 8)) * 0x100000001B3ull;
  }
  return h;
}

uint64_t Fnv1aBytes(uint64_t h, const uint8_t* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

struct Digests {
  uint64_t output;
  uint64_t wire;
};

TwoShotParams GoldenParams(int ws, Codec codec, DType dtype, bool cast) {
  TwoShotParams p;
  p.world_size = ws;
  p.codec = codec;
  p.dtype = dtype;
  p.cast_bf16_to_fp16 = cast;
  p.num_elems = kTileElems + 4096 + 40;  // a full tile and a partial one
  return p;
}

Digests Compute(int ws, Codec codec, DType dtype, bool cast) {
  const TwoShotParams p = GoldenParams(ws, codec, dtype, cast);
  std::vector<std::vector<uint16_t>> in, out(ws, std::vector<uint16_t>(p.num_elems));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < ws; ++r) in.push_back(Inputs(dtype, r, p.num_elems));
  for (int r = 0; r < ws; ++r) {
    ins.push_back(in[r].data());
    outs.push_back(out[r].data());
  }
  EXPECT_TRUE(ReferenceAllReduce(p, ins.data(), outs.data()).ok());
  // The same call's wire bytes, from the step functions, in a fixed order:
  // per tile, every (source, destination) phase-1 shard, then every owner's
  // phase-2 shard.
  const int64_t shard_wire = ShardWireBytes(codec, ws);
  std::vector<uint8_t> phase0(static_cast<size_t>(ws * ws * shard_wire));
  std::vector<uint8_t> phase1(static_cast<size_t>(shard_wire));
  std::vector<uint16_t> reduced(static_cast<size_t>(ShardElems(ws)));
  std::vector<const uint8_t*> received(static_cast<size_t>(ws));
  uint64_t wire = 0xCBF29CE484222325ull;
  for (int64_t tile = 0; tile < NumTiles(p.num_elems); ++tile) {
    for (int src = 0; src < ws; ++src) {
      for (int dst = 0; dst < ws; ++dst) {
        EncodeInputShard(p, ins[src], tile, dst, phase0.data() + (dst * ws + src) * shard_wire);
      }
    }
    wire = Fnv1aBytes(wire, phase0.data(), static_cast<int64_t>(phase0.size()));
    for (int owner = 0; owner < ws; ++owner) {
      for (int src = 0; src < ws; ++src) {
        received[src] = phase0.data() + (owner * ws + src) * shard_wire;
      }
      ReduceShard(p, received.data(), reduced.data());
      EncodeReducedShard(p, reduced.data(), phase1.data());
      wire = Fnv1aBytes(wire, phase1.data(), shard_wire);
    }
  }
  return {Fnv1a(out[0].data(), p.num_elems), wire};
}

struct Golden {
  int ws;
  Codec codec;
  DType dtype;
  bool cast;
  uint64_t output_digest;
  uint64_t wire_digest;
};

constexpr Golden kGolden[] = {
#include "kernels/two_shot_golden.inc"
};

// "kInt4" for INT4, "kFp" for FP: the enumerator's name.
std::string CodecEnumName(Codec c) {
  std::string name = CodecName(c);
  for (size_t i = 1; i < name.size(); ++i) name[i] = static_cast<char>(std::tolower(name[i]));
  return "k" + name;
}

TEST(TwoShotGoldenTest, OutputsAndWireBytesMatchPinnedDigests) {
  int checked = 0;
  for (const Golden& g : kGolden) {
    const Digests d = Compute(g.ws, g.codec, g.dtype, g.cast);
    const std::string name = "ws" + std::to_string(g.ws) + " " + CodecName(g.codec) + " " +
                             DTypeName(g.dtype) + (g.cast ? " cast" : "");
    EXPECT_EQ(d.output, g.output_digest) << name << ": output values";
    EXPECT_EQ(d.wire, g.wire_digest) << name << ": wire bytes";
    if (d.output != g.output_digest || d.wire != g.wire_digest) {
      // The entry as two_shot_golden.inc spells it, for a deliberate change.
      std::printf("    {%d, Codec::%s, DType::%s, %s, 0x%016llXull, 0x%016llXull},\n", g.ws,
                  CodecEnumName(g.codec).c_str(),
                  g.dtype == DType::kFloat16 ? "kFloat16" : "kBFloat16", g.cast ? "true" : "false",
                  static_cast<unsigned long long>(d.output),
                  static_cast<unsigned long long>(d.wire));
    }
    ++checked;
  }
  EXPECT_EQ(checked, 39);  // ws 2: 5 codecs x 3 dtype modes; ws 4 and 8: 4 x 3
}

TEST(TwoShotGoldenTest, ScaleFactorsAreTheNearestFloats) {
  for (Codec c : {Codec::kInt8, Codec::kInt6, Codec::kInt4, Codec::kInt3}) {
    const long double exact = 1.0L / (CodeBias(c) - 0.5L);
    const float f = ScaleFactor(c);
    const float below = BitsToFloat(FloatBits(f) - 1);
    const float above = BitsToFloat(FloatBits(f) + 1);
    EXPECT_LT(std::fabs(static_cast<long double>(f) - exact),
              std::fabs(static_cast<long double>(below) - exact))
        << CodecName(c);
    EXPECT_LT(std::fabs(static_cast<long double>(f) - exact),
              std::fabs(static_cast<long double>(above) - exact))
        << CodecName(c);
  }
}

}  // namespace
}  // namespace qr::kernels
