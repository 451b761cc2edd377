// The FP8 output's device conversion (kernels/gpu/fp8_output.cuh
// E4m3Chunk: the GPU's own instruction where platform::kE4m3Convert, else
// kernels/float8.h's function) against kernels/float8.h on every fp32 bit
// pattern, so a fused call's quant_out is the host reference's whatever
// values its norm holds. Suite part "fused" (tools/gpu/run_suite.sh).
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/float16.h"
#include "kernels/float8.h"
#include "tests/gpu/fp8_kernels.h"
#include "tests/util/status_matchers.h"

namespace qr::testing {
namespace {

TEST(Fp8GpuTest, EveryFp32ValueConvertsAsTheHost) {
  constexpr uint64_t kAll = uint64_t{1} << 32;
  ASSERT_OK_AND_ASSIGN(const E4m3Sweep sweep, SweepE4m3Chunk(0, kAll));
  EXPECT_EQ(sweep.mismatches, 0u) << "first at fp32 bits 0x" << std::hex << sweep.first_bits
                                  << ": host 0x"
                                  << static_cast<int>(kernels::E4m3FromFloatBits(sweep.first_bits));
}

// Byte order within a chunk, and the values a wrong order or a signed NaN
// would change.
TEST(Fp8GpuTest, ChunkBytesAreInValueOrder) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float values[16] = {1.0f,  -2.0f,        448.0f,        500.0f, -inf,   nan,  -nan,   0.0f,
                            -0.0f, 0.001953125f, 0.0009765625f, 3.0f,   240.0f, 0.5f, -0.25f, 7.0f};
  std::vector<uint32_t> bits(16);
  for (int i = 0; i < 16; ++i) bits[i] = kernels::FloatBits(values[i]);
  std::vector<uint8_t> codes(16);
  ASSERT_OK(E4m3ChunkCodes(bits.data(), bits.size(), codes.data()));
  const uint8_t want[16] = {0x38, 0xC0, 0x7E, 0x7E, 0xFE, 0x7F, 0x7F, 0x00,
                            0x80, 0x01, 0x00, 0x44, 0x77, 0x30, 0xA8, 0x4E};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(codes[i], want[i]) << i;
    EXPECT_EQ(codes[i], kernels::E4m3FromFloatBits(bits[i])) << i;
  }
}

}  // namespace
}  // namespace qr::testing
