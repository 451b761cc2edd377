// Encode/decode throughput of the host reference codecs (ws-2 shards), and one whole
// two-shot all-reduce simulated in one process. Not run in CI:
//   ./bazelw run -c opt //kernels:codec_benchmark
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/codec.h"
#include "kernels/test_data.h"
#include "kernels/two_shot_reference.h"

namespace qr::kernels {
namespace {

constexpr int64_t kElems = 1 << 20;  // 2 MiB of 16-bit values

std::vector<uint16_t> Data(DType dtype) {
  std::vector<uint16_t> v(kElems);
  std::mt19937_64 rng(1);
  testing::FillUniform(dtype, rng, v.data(), v.size());
  return v;
}

void BM_Encode(benchmark::State& state) {
  const Codec codec = static_cast<Codec>(state.range(0));
  const DType dtype = static_cast<DType>(state.range(1));
  const std::vector<uint16_t> values = Data(dtype);
  std::vector<uint8_t> wire(WireBytes(codec, kElems));
  for (auto _ : state) {
    for (int64_t s = 0; s < kElems / ShardElems(2); ++s) {
      EncodeShard(codec, dtype, 2, values.data() + s * ShardElems(2),
                  wire.data() + s * ShardWireBytes(codec, 2));
    }
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetBytesProcessed(state.iterations() * kElems * 2);
  state.SetLabel(std::string(CodecName(codec)) + " " + DTypeName(dtype));
}

void BM_Decode(benchmark::State& state) {
  const Codec codec = static_cast<Codec>(state.range(0));
  const DType dtype = static_cast<DType>(state.range(1));
  const std::vector<uint16_t> values = Data(dtype);
  std::vector<uint8_t> wire(WireBytes(codec, kElems));
  for (int64_t s = 0; s < kElems / ShardElems(2); ++s) {
    EncodeShard(codec, dtype, 2, values.data() + s * ShardElems(2),
                wire.data() + s * ShardWireBytes(codec, 2));
  }
  std::vector<float> out(kElems);
  for (auto _ : state) {
    for (int64_t s = 0; s < kElems / ShardElems(2); ++s) {
      DecodeShard(codec, dtype, 2, wire.data() + s * ShardWireBytes(codec, 2),
                  out.data() + s * ShardElems(2));
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * kElems * 2);
  state.SetLabel(std::string(CodecName(codec)) + " " + DTypeName(dtype));
}

void BM_ReferenceAllReduce(benchmark::State& state) {
  TwoShotParams p;
  p.world_size = static_cast<int>(state.range(1));
  p.codec = static_cast<Codec>(state.range(0));
  p.dtype = DType::kFloat16;
  p.num_elems = kElems / p.world_size;
  const std::vector<uint16_t> data = Data(p.dtype);
  std::vector<std::vector<uint16_t>> out(p.world_size, std::vector<uint16_t>(p.num_elems));
  std::vector<const uint16_t*> ins;
  std::vector<uint16_t*> outs;
  for (int r = 0; r < p.world_size; ++r) {
    ins.push_back(data.data() + r * p.num_elems);
    outs.push_back(out[r].data());
  }
  for (auto _ : state) {
    if (!ReferenceAllReduce(p, ins.data(), outs.data()).ok()) state.SkipWithError("invalid");
  }
  // Bytes of input over all ranks.
  state.SetBytesProcessed(state.iterations() * kElems * 2);
  state.SetLabel(std::string(CodecName(p.codec)) + " ws" + std::to_string(p.world_size));
}

void CodecArgs(benchmark::internal::Benchmark* b) {
  for (int codec = 0; codec < kNumCodecs; ++codec) {
    for (int dtype = 0; dtype < 2; ++dtype) b->Args({codec, dtype});
  }
}

BENCHMARK(BM_Encode)->Apply(CodecArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decode)->Apply(CodecArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReferenceAllReduce)
    ->Args({0, 2})
    ->Args({3, 2})
    ->Args({4, 2})
    ->Args({1, 8})
    ->Args({3, 8})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace qr::kernels
