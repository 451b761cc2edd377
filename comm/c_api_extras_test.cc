// The C ABI's introspection and reference additions (comm/c_api_extras.cc).
// That a group's results equal qr_reference_all_reduce bit for bit is
// checked across processes by the Python suites (python/tests).
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/config.h"
#include "comm/policy.h"
#include "comm/quickreduce.h"
#include "common/version.h"
#include "gtest/gtest.h"
#include "kernels/error_bound.h"
#include "kernels/float16.h"
#include "kernels/two_shot_reference.h"
#include "nlohmann/json.hpp"

namespace qr {
namespace {

using ::nlohmann::json;
using ::qr::kernels::FloatToHalf;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

std::vector<uint16_t> Fp16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(FloatToHalf(f));
  return out;
}

TEST(CApiExtrasTest, VersionIsTheProjectVersion) { EXPECT_STREQ(qr_version(), kVersion); }

TEST(CApiExtrasTest, ConfigJsonShowsTheEnvironment) {
  ScopedEnv q("QR_QUANTIZATION", "INT6");
  ScopedEnv m("QR_ONE_SHOT_MAX_KB", "64");
  const char* text = qr_config_json(nullptr);
  ASSERT_NE(text, nullptr) << qr_last_error();
  const json j = json::parse(text);
  EXPECT_EQ(j["version"], kVersion);
  EXPECT_EQ(j["regime"], "INT6");
  EXPECT_EQ(j["one_shot_max_bytes"], 64 * 1024);
  EXPECT_EQ(j["one_shot_ceiling_bytes"]["4"], 64 * 1024);
  EXPECT_TRUE(j["min_size_bytes"]["8"].contains("bf16"));
  EXPECT_TRUE(j["quantization_min_size_bytes"].is_null());
}

// What a group puts in /dev/shm follows the library's geometry: the group
// segment for every backend, plus one data object per rank on the host
// backend, whose one-shot region follows the ceiling (python/tests/
// test_doctor.py checks the numbers against a real group's objects).
TEST(CApiExtrasTest, ConfigJsonSaysWhatAGroupNeedsInSharedMemory) {
  const char* text = qr_config_json(nullptr);
  ASSERT_NE(text, nullptr) << qr_last_error();
  const json big = json::parse(text)["shm_bytes"];
  uint64_t previous_gpu = 0;
  for (const char* ws : {"2", "4", "8"}) {
    SCOPED_TRACE(ws);
    const uint64_t gpu = big[ws]["gpu"], host = big[ws]["host"];
    EXPECT_GT(gpu, previous_gpu);                    // one slot per member
    EXPECT_GT(host, gpu + 4 * (uint64_t{1} << 20));  // at least the two-shot slots
    previous_gpu = gpu;
  }
  ScopedEnv m("QR_ONE_SHOT_MAX_KB", "0");  // no one-shot region
  text = qr_config_json(nullptr);
  ASSERT_NE(text, nullptr) << qr_last_error();
  const json small = json::parse(text)["shm_bytes"];
  EXPECT_EQ(small["2"]["gpu"], big["2"]["gpu"]);
  EXPECT_LT(small["2"]["host"], big["2"]["host"]);
}

// The device view works without a GPU (CI) and with one: an n x n matrix
// whose diagonal is null.
TEST(CApiExtrasTest, DevicesJsonListsTheVisibleGpusAndTheirPeerMatrix) {
  const char* text = qr_devices_json();
  ASSERT_NE(text, nullptr) << qr_last_error();
  const json j = json::parse(text);
  ASSERT_TRUE(j["devices"].is_array());
  const size_t n = j["devices"].size();
  EXPECT_TRUE(j["runtime_version"].is_number_integer());
  EXPECT_TRUE(j["driver_version"].is_number_integer());
  ASSERT_EQ(j["peer_access"].size(), n);
  ASSERT_EQ(j["peer_access_source"].size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(j["peer_access"][i].size(), n);
    EXPECT_TRUE(j["peer_access"][i][i].is_null());
    EXPECT_TRUE(j["devices"][i]["pci_bus_id"].is_string());
  }
}

TEST(CApiExtrasTest, ConfigJsonRefusesAnInvalidEnvironment) {
  ScopedEnv q("QR_QUANTIZATION", "INT5");
  EXPECT_EQ(qr_config_json(nullptr), nullptr);
  EXPECT_NE(std::string(qr_last_error()).find("QR_QUANTIZATION"), std::string::npos);
}

TEST(CApiExtrasTest, ShouldAllReduceExWithoutCommunicatorIsNo) {
  EXPECT_EQ(qr_should_all_reduce_ex(nullptr, 1 << 20, QR_FLOAT16, QR_REGIME_FP, 0), 0);
}

TEST(CApiExtrasTest, ReferenceSumsExactlyInFp) {
  const std::vector<uint16_t> a = Fp16({1, 2, 3, 4, 5, 6, 7, 8});
  const std::vector<uint16_t> b = Fp16({10, 20, 30, 40, 50, 60, 70, -8});
  const void* inputs[] = {a.data(), b.data()};
  std::vector<uint16_t> out(8);
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, 8, QR_FLOAT16, QR_REGIME_FP, 0, out.data()), QR_OK)
      << qr_last_error();
  EXPECT_EQ(out, Fp16({11, 22, 33, 44, 55, 66, 77, 0}));
}

TEST(CApiExtrasTest, ReferenceTakesTheAlgorithmThePolicyPicks) {
  // 64 KiB: one-shot under the built-in ceilings, two-shot with the ceiling
  // at 0. One-shot ignores the codec, so INT4 differs between the two runs.
  const size_t n = 32768;
  std::vector<std::vector<uint16_t>> in(2, std::vector<uint16_t>(n));
  for (size_t i = 0; i < n; ++i) {
    in[0][i] = FloatToHalf(static_cast<float>(i % 97) / 7.0f);
    in[1][i] = FloatToHalf(static_cast<float>(i % 89) / -3.0f);
  }
  const void* inputs[] = {in[0].data(), in[1].data()};
  std::vector<uint16_t> one(n), fp(n), two(n);
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, n, QR_FLOAT16, QR_REGIME_INT4, 0, one.data()),
            QR_OK);
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, n, QR_FLOAT16, QR_REGIME_FP, 0, fp.data()), QR_OK);
  EXPECT_EQ(one, fp);
  {
    ScopedEnv never("QR_ONE_SHOT_MAX_KB", "0");
    ASSERT_EQ(qr_reference_all_reduce(inputs, 2, n, QR_FLOAT16, QR_REGIME_INT4, 0, two.data()),
              QR_OK);
    double ratio = -1;
    size_t violations = 1;
    ASSERT_EQ(qr_reference_check_bound(inputs, 2, n, QR_FLOAT16, QR_REGIME_INT4, 0, two.data(),
                                       &ratio, &violations),
              QR_OK);
    EXPECT_EQ(violations, 0u);
    EXPECT_GT(ratio, 0);
    EXPECT_LE(ratio, 1);
  }
  EXPECT_NE(one, two);
}

TEST(CApiExtrasTest, ReferenceCheckBoundCountsViolations) {
  const std::vector<uint16_t> a = Fp16({1, 2, 3, 4, 5, 6, 7, 8});
  const void* inputs[] = {a.data(), a.data()};
  std::vector<uint16_t> wrong = Fp16({2, 4, 6, 8, 10, 12, 14, 17});
  double ratio = 0;
  size_t violations = 0;
  ASSERT_EQ(qr_reference_check_bound(inputs, 2, 8, QR_FLOAT16, QR_REGIME_FP, 0, wrong.data(),
                                     &ratio, &violations),
            QR_OK);
  EXPECT_EQ(violations, 1u);
  EXPECT_GT(ratio, 1);
}

TEST(CApiExtrasTest, ReferenceErrorBoundsAreTheKernelBoundPerElement) {
  // Two ranks, 64 values: the first block of 32 finite, the second holding
  // an inf in rank 1.
  std::vector<float> fa(64), fb(64);
  for (int i = 0; i < 64; ++i) {
    fa[i] = 0.37f * static_cast<float>(i) - 5.0f;
    fb[i] = 1.0f / static_cast<float>(i + 1);
  }
  fb[40] = INFINITY;
  const std::vector<uint16_t> a = Fp16(fa), b = Fp16(fb);
  const void* inputs[] = {a.data(), b.data()};
  std::vector<double> bounds(64, -1.0);
  ASSERT_EQ(qr_reference_error_bounds(inputs, 2, 64, QR_FLOAT16, QR_REGIME_INT4, 0, bounds.data()),
            QR_OK)
      << qr_last_error();
  double absmax[2] = {0, 0};
  for (int i = 0; i < 32; ++i) {
    absmax[0] = std::max(absmax[0], std::fabs(static_cast<double>(kernels::HalfToFloat(a[i]))));
    absmax[1] = std::max(absmax[1], std::fabs(static_cast<double>(kernels::HalfToFloat(b[i]))));
  }
  for (int i = 0; i < 32; ++i) {
    const double va = kernels::HalfToFloat(a[i]), vb = kernels::HalfToFloat(b[i]);
    const double element_abs[2] = {std::fabs(va), std::fabs(vb)};
    EXPECT_EQ(bounds[i], kernels::TwoShotErrorBound(Codec::kInt4, DType::kFloat16, false, 2, absmax,
                                                    element_abs, va + vb))
        << "element " << i;
    EXPECT_GT(bounds[i], 0);
  }
  for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(bounds[i])) << "element " << i;
  // A bound is a bound: the reference's own INT4 result stays within it.
  std::vector<uint16_t> out(64);
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, 64, QR_FLOAT16, QR_REGIME_INT4, 0, out.data()),
            QR_OK);
  for (int i = 0; i < 32; ++i) {
    const double exact =
        static_cast<double>(kernels::HalfToFloat(a[i])) + kernels::HalfToFloat(b[i]);
    EXPECT_LE(std::fabs(kernels::HalfToFloat(out[i]) - exact), bounds[i]) << "element " << i;
  }
  // FP's bound is smaller than INT4's everywhere.
  std::vector<double> fp(64);
  ASSERT_EQ(qr_reference_error_bounds(inputs, 2, 64, QR_FLOAT16, QR_REGIME_FP, 0, fp.data()),
            QR_OK);
  for (int i = 0; i < 32; ++i) EXPECT_LT(fp[i], bounds[i]) << "element " << i;
}

TEST(CApiExtrasTest, ReferenceErrorBoundsNeedACodec) {
  std::vector<uint16_t> a(16);
  const void* inputs[] = {a.data(), a.data(), a.data(), a.data()};
  std::vector<double> bounds(16);
  EXPECT_EQ(
      qr_reference_error_bounds(inputs, 2, 16, QR_FLOAT16, QR_REGIME_CONFIGURED, 0, bounds.data()),
      QR_INVALID_ARGUMENT);
  EXPECT_EQ(qr_reference_error_bounds(inputs, 2, 16, QR_FLOAT16, QR_REGIME_NONE, 0, bounds.data()),
            QR_INVALID_ARGUMENT);
  EXPECT_EQ(qr_reference_error_bounds(inputs, 2, 16, QR_FLOAT16, QR_REGIME_FP, 0, nullptr),
            QR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qr_last_error()).find("bounds is NULL"), std::string::npos);
  EXPECT_EQ(qr_reference_error_bounds(inputs, 4, 16, QR_FLOAT16, QR_REGIME_INT3, 0, bounds.data()),
            QR_UNSUPPORTED);
}

TEST(CApiExtrasTest, ReferenceRefusesWhatTheGroupRefuses) {
  std::vector<uint16_t> a(16), out(16);
  const void* inputs[] = {a.data(), a.data(), a.data(), a.data()};
  EXPECT_EQ(qr_reference_all_reduce(inputs, 4, 16, QR_FLOAT16, QR_REGIME_INT3, 0, out.data()),
            QR_UNSUPPORTED);
  EXPECT_EQ(qr_reference_all_reduce(inputs, 2, 16, QR_FLOAT16, QR_REGIME_NONE, 0, out.data()),
            QR_UNSUPPORTED);
  EXPECT_EQ(qr_reference_all_reduce(inputs, 3, 16, QR_FLOAT16, QR_REGIME_FP, 0, out.data()),
            QR_INVALID_ARGUMENT);
  EXPECT_EQ(qr_reference_all_reduce(inputs, 2, 12, QR_FLOAT16, QR_REGIME_FP, 0, out.data()),
            QR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qr_last_error()).find("multiple of 16"), std::string::npos);
  EXPECT_EQ(
      qr_reference_all_reduce(inputs, 2, 16, static_cast<qr_dtype>(7), QR_REGIME_FP, 0, out.data()),
      QR_INVALID_ARGUMENT);
  EXPECT_EQ(qr_reference_all_reduce(nullptr, 2, 16, QR_FLOAT16, QR_REGIME_FP, 0, out.data()),
            QR_INVALID_ARGUMENT);
  {
    ScopedEnv q("QR_QUANTIZATION", "NONE");
    EXPECT_EQ(
        qr_reference_all_reduce(inputs, 2, 16, QR_FLOAT16, QR_REGIME_CONFIGURED, 0, out.data()),
        QR_UNSUPPORTED);
  }
  {
    ScopedEnv m("QR_MAX_SIZE_BYTES_MB", "1");
    std::vector<uint16_t> big(1 << 20), big_out(1 << 20);
    const void* big_in[] = {big.data(), big.data()};
    EXPECT_EQ(
        qr_reference_all_reduce(big_in, 2, big.size(), QR_FLOAT16, QR_REGIME_FP, 0, big_out.data()),
        QR_INVALID_ARGUMENT);
  }
}

TEST(CApiExtrasTest, ReferenceConfiguredAppliesTheFpThreshold) {
  // INT8 configured with a 1 MiB FP threshold: a 512 KiB two-shot call runs
  // FP, so it equals the forced FP call.
  ScopedEnv q("QR_QUANTIZATION", "INT8");
  ScopedEnv t("QR_QUANTIZATION_MIN_SIZE_KB", "1024");
  ScopedEnv never("QR_ONE_SHOT_MAX_KB", "0");
  const size_t n = 262144;
  std::vector<uint16_t> a(n), b(n), cfg(n), fp(n), int8(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = FloatToHalf(static_cast<float>(i % 101) / 9.0f);
    b[i] = FloatToHalf(static_cast<float>(i % 61) / -5.0f);
  }
  const void* inputs[] = {a.data(), b.data()};
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, n, QR_FLOAT16, QR_REGIME_CONFIGURED, 0, cfg.data()),
            QR_OK);
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, n, QR_FLOAT16, QR_REGIME_FP, 0, fp.data()), QR_OK);
  ASSERT_EQ(qr_reference_all_reduce(inputs, 2, n, QR_FLOAT16, QR_REGIME_INT8, 0, int8.data()),
            QR_OK);
  EXPECT_EQ(cfg, fp);
  EXPECT_NE(cfg, int8);
}

}  // namespace
}  // namespace qr
