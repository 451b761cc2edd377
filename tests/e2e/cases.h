// All-reduce cases for end-to-end workers: parse/format, run one through a
// communicator, and verify it (bit-identical to the reference of the
// algorithm the policy picks for it, and within the bound of the exact sum).
#ifndef QR_TESTS_E2E_CASES_H_
#define QR_TESTS_E2E_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/config.h"
#include "kernels/two_shot_reference.h"
#include "kernels/types.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {

struct Case {
  Codec codec = Codec::kFp;
  DType dtype = DType::kFloat16;
  bool cast = false;  // cast_bf16_to_fp16 (bf16 only)
  bool in_place = false;
  int64_t count = 0;  // elements per rank
  uint64_t seed = 1;
};

// "INT8.bf16.c.i.4096" (c / - for the cast, i / - for in place), comma-joined.
std::string FormatCases(const std::vector<Case>& cases);
std::vector<Case> ParseCases(const std::string& text);
std::string CaseName(const Case& c);

// Every (codec legal for ws) x (fp16, bf16 cast, bf16 no cast) x counts; in
// place on every other case.
std::vector<Case> Sweep(int world_size, const std::vector<int64_t>& counts);

kernels::TwoShotParams ParamsOf(const Case& c, int world_size);

// The algorithm a communicator with `config` runs `c` with (comm/policy.h).
Algorithm AlgorithmOf(const Config& config, const Case& c, int world_size);

// demo::Verify against the reference of `algorithm`.
demo::Verdict VerifyCase(const Case& c, int world_size, Algorithm algorithm,
                         const uint16_t* output);

// Runs one case on `comm` (inputs from FillInput with c.seed); stores the
// output. Returns the all-reduce status.
Status RunCase(Communicator& comm, const Case& c, std::vector<uint16_t>* output);

}  // namespace qr::testing

#endif  // QR_TESTS_E2E_CASES_H_
