#include "tests/e2e/cases.h"

#include <sstream>

#include "comm/config.h"
#include "comm/policy.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {

std::string CaseName(const Case& c) {
  return std::string(CodecName(c.codec)) + "." + DTypeName(c.dtype) + "." + (c.cast ? "c" : "-") +
         "." + (c.in_place ? "i" : "-") + "." + std::to_string(c.count);
}

std::string FormatCases(const std::vector<Case>& cases) {
  std::string s;
  for (const Case& c : cases) s += (s.empty() ? "" : ",") + CaseName(c);
  return s;
}

std::vector<Case> ParseCases(const std::string& text) {
  std::vector<Case> cases;
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, ',')) {
    std::stringstream parts(item);
    std::string codec, dtype, cast, in_place, count;
    std::getline(parts, codec, '.');
    std::getline(parts, dtype, '.');
    std::getline(parts, cast, '.');
    std::getline(parts, in_place, '.');
    std::getline(parts, count, '.');
    Case c;
    c.codec = CodecFromName(codec).value_or(c.codec);
    c.dtype = dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
    c.cast = cast == "c";
    c.in_place = in_place == "i";
    c.count = std::stoll(count);
    c.seed = 1000 + cases.size();
    cases.push_back(c);
  }
  return cases;
}

std::vector<Case> Sweep(int world_size, const std::vector<int64_t>& counts) {
  std::vector<Case> cases;
  for (Codec codec : kAllCodecs) {
    if (codec == Codec::kInt3 && world_size != 2) continue;
    for (int d = 0; d < 3; ++d) {
      for (int64_t n : counts) {
        Case c;
        c.codec = codec;
        c.dtype = d == 0 ? DType::kFloat16 : DType::kBFloat16;
        c.cast = d == 1;
        c.count = n;
        c.in_place = cases.size() % 2 == 1;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

kernels::TwoShotParams ParamsOf(const Case& c, int world_size) {
  kernels::TwoShotParams p;
  p.world_size = world_size;
  p.codec = c.codec;
  p.dtype = c.dtype;
  p.cast_bf16_to_fp16 = c.cast && c.dtype == DType::kBFloat16;
  p.num_elems = c.count;
  return p;
}

Algorithm AlgorithmOf(const Config& config, const Case& c, int world_size) {
  return ChooseAlgorithm(config, static_cast<size_t>(c.count) * 2, world_size,
                         WorkFormatOf(c.dtype, c.cast), c.codec);
}

demo::Verdict VerifyCase(const Case& c, int world_size, Algorithm algorithm,
                         const uint16_t* output) {
  return demo::Verify(ParamsOf(c, world_size), c.seed, output, algorithm);
}

Status RunCase(Communicator& comm, const Case& c, std::vector<uint16_t>* output) {
  std::vector<uint16_t> in(static_cast<size_t>(c.count));
  demo::FillInput(c.dtype, comm.rank(), c.seed, c.count, in.data());
  if (c.in_place) {
    Status s = comm.AllReduce(in.data(), in.data(), in.size(), c.dtype,
                              static_cast<Regime>(c.codec), c.cast);
    *output = std::move(in);
    return s;
  }
  output->assign(in.size(), 0xFFFF);
  return comm.AllReduce(in.data(), output->data(), in.size(), c.dtype, static_cast<Regime>(c.codec),
                        c.cast);
}

}  // namespace qr::testing
