#include "comm/config.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::qr::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

const char* const kAllVars[] = {
    "QR_QUANTIZATION",
    "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION",
    "QR_CAST_BF16_TO_FP16",
    "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16",
    "QR_MAX_SIZE_BYTES_MB",
    "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB",
    "QR_MIN_SIZE_BYTES_MB",
    "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB",
    "QR_QUANTIZATION_MIN_SIZE_KB",
    "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION_MIN_SIZE_KB",
    "QR_MIN_SIZE_TABLE",
    "QR_OP_TIMEOUT_MS",
    "QR_ONE_SHOT_MAX_KB",
    "QR_ALLOW_SHARED_DEVICE",
};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kAllVars) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
  static void Set(const char* name, const char* value) { setenv(name, value, 1); }
};

// DESIGN.md "Configuration": an unset environment runs FP on every platform;
// bf16 goes through fp16 by default on AMD only.
TEST_F(ConfigTest, DefaultsFollowDesign) {
  for (Platform p : {Platform::kHost, Platform::kNvidia, Platform::kAmd}) {
    SCOPED_TRACE(PlatformName(p));
    ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(p));
    EXPECT_EQ(c.platform, p);
    EXPECT_EQ(c.regime, Regime::kFp);
    EXPECT_EQ(c.cast_bf16_to_fp16, p == Platform::kAmd);
    EXPECT_EQ(c.max_size_bytes, int64_t{2048} << 20);
    EXPECT_FALSE(c.min_size_bytes_override.has_value());
    EXPECT_FALSE(c.quantization_min_size_bytes.has_value());
    EXPECT_FALSE(c.one_shot_max_bytes.has_value());
    EXPECT_FALSE(c.min_size_table.has_value());
    EXPECT_EQ(c.op_timeout_ms, 30000);
    EXPECT_FALSE(c.allow_shared_device);
  }
  // A default-constructed Config is the host platform's defaults.
  const Config d;
  EXPECT_EQ(d.platform, Platform::kHost);
  EXPECT_EQ(d.regime, Regime::kFp);
  EXPECT_FALSE(d.cast_bf16_to_fp16);
}

// NONE stays available, and the vLLM names keep their meaning on every
// platform: a vLLM user's explicit cast or NONE is honoured on NVIDIA too.
TEST_F(ConfigTest, ExplicitSettingsBeatPlatformDefaults) {
  Set("QR_QUANTIZATION", "NONE");
  Set("VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "1");
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kNvidia));
  EXPECT_EQ(c.regime, Regime::kNone);
  EXPECT_TRUE(c.cast_bf16_to_fp16);
  unsetenv("QR_QUANTIZATION");
  Set("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "NONE");
  Set("VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "false");
  ASSERT_OK_AND_ASSIGN(c, LoadConfigFromEnv(Platform::kAmd));
  EXPECT_EQ(c.regime, Regime::kNone);
  EXPECT_FALSE(c.cast_bf16_to_fp16);
}

TEST_F(ConfigTest, SharedDeviceIsATestingModeSetExplicitly) {
  Set("QR_ALLOW_SHARED_DEVICE", "1");
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_TRUE(c.allow_shared_device);
  Set("QR_ALLOW_SHARED_DEVICE", "0");
  ASSERT_OK_AND_ASSIGN(c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_FALSE(c.allow_shared_device);
  Set("QR_ALLOW_SHARED_DEVICE", "yes please");
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_ALLOW_SHARED_DEVICE")));
}

TEST_F(ConfigTest, OneShotCeilingIsReadInKiB) {
  Set("QR_ONE_SHOT_MAX_KB", "384");
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_EQ(c.one_shot_max_bytes, 384 * kKiB);
  Set("QR_ONE_SHOT_MAX_KB", "0");  // one-shot off
  ASSERT_OK_AND_ASSIGN(c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_EQ(c.one_shot_max_bytes, 0);
}

TEST_F(ConfigTest, BadOneShotCeilingIsAnError) {
  for (const char* bad : {"-1", "1.5", "64k", " ", "99999999999999999999"}) {
    Set("QR_ONE_SHOT_MAX_KB", bad);
    EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("QR_ONE_SHOT_MAX_KB"), HasSubstr("allowed"))))
        << "'" << bad << "'";
  }
}

TEST_F(ConfigTest, OpTimeoutIsReadAndChecked) {
  Set("QR_OP_TIMEOUT_MS", "250");
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_EQ(c.op_timeout_ms, 250);
  Set("QR_OP_TIMEOUT_MS", "0");
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_OP_TIMEOUT_MS")));
}

TEST_F(ConfigTest, ParsesEveryRegimeCaseInsensitively) {
  const std::pair<const char*, Regime> cases[] = {
      {"FP", Regime::kFp},     {"int8", Regime::kInt8},   {"Int6", Regime::kInt6},
      {"INT4", Regime::kInt4}, {" int3 ", Regime::kInt3}, {"none", Regime::kNone}};
  for (const auto& [text, regime] : cases) {
    Set("QR_QUANTIZATION", text);
    ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
    EXPECT_EQ(c.regime, regime) << text;
  }
}

TEST_F(ConfigTest, VllmNamesAreAliasesAndOursWin) {
  Set("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "INT6");
  Set("VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "0");
  Set("VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", "512");
  Set("VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "3");
  Set("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION_MIN_SIZE_KB", "64");
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_EQ(c.regime, Regime::kInt6);
  EXPECT_FALSE(c.cast_bf16_to_fp16);
  EXPECT_EQ(c.max_size_bytes, 512 * kMiB);
  EXPECT_EQ(c.min_size_bytes_override, 3 * kMiB);
  EXPECT_EQ(c.quantization_min_size_bytes, 64 * kKiB);

  Set("QR_QUANTIZATION", "INT4");
  Set("QR_CAST_BF16_TO_FP16", "true");
  Set("QR_MAX_SIZE_BYTES_MB", "1024");
  Set("QR_MIN_SIZE_BYTES_MB", "0");
  Set("QR_QUANTIZATION_MIN_SIZE_KB", "0");
  ASSERT_OK_AND_ASSIGN(c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_EQ(c.regime, Regime::kInt4);
  EXPECT_TRUE(c.cast_bf16_to_fp16);
  EXPECT_EQ(c.max_size_bytes, 1024 * kMiB);
  EXPECT_EQ(c.min_size_bytes_override, 0);
  EXPECT_EQ(c.quantization_min_size_bytes, 0);
}

TEST_F(ConfigTest, BadRegimeNamesTheVariableAndChoices) {
  Set("QR_QUANTIZATION", "INT5");
  EXPECT_THAT(
      LoadConfigFromEnv(Platform::kHost).status(),
      StatusIs(StatusCode::kInvalidArgument, AllOf(HasSubstr("QR_QUANTIZATION"), HasSubstr("INT5"),
                                                   HasSubstr("FP, INT8, INT6, INT4, INT3, NONE"))));
  unsetenv("QR_QUANTIZATION");
  Set("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "FP8");
  EXPECT_THAT(
      LoadConfigFromEnv(Platform::kHost).status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION")));
}

TEST_F(ConfigTest, BadCastFlagIsAnError) {
  Set("QR_CAST_BF16_TO_FP16", "maybe");
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("QR_CAST_BF16_TO_FP16"), HasSubstr("true/false"))));
}

TEST_F(ConfigTest, BadSizesAreErrors) {
  for (const char* bad : {"0", "-1", "1.5", "lots", "1048577"}) {
    Set("QR_MAX_SIZE_BYTES_MB", bad);
    EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("QR_MAX_SIZE_BYTES_MB"), HasSubstr("allowed"))))
        << bad;
  }
  unsetenv("QR_MAX_SIZE_BYTES_MB");
  Set("QR_MIN_SIZE_BYTES_MB", "-2");
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_MIN_SIZE_BYTES_MB")));
  unsetenv("QR_MIN_SIZE_BYTES_MB");
  Set("QR_QUANTIZATION_MIN_SIZE_KB", "x");
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("QR_QUANTIZATION_MIN_SIZE_KB")));
}

TEST_F(ConfigTest, MinAboveMaxIsAnError) {
  Set("QR_MAX_SIZE_BYTES_MB", "64");
  Set("VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "65");
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB=65"),
                             HasSubstr("[0, 64]"))));
  Set("VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "64");
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
  EXPECT_EQ(c.min_size_bytes_override, 64 * kMiB);
}

TEST_F(ConfigTest, MinSizeTableFileReplacesRows) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/min_size_table.txt";
  {
    std::ofstream f(path);
    f << "# measured on this machine\n"
         "            FP  INT8 INT6 INT4 INT3\n"
         "fp16 ws2     3     4    5    6    7\n"
         "\n"
         "bf16 ws8     0     1    1    1    1\n";
  }
  Set("QR_MIN_SIZE_TABLE", path.c_str());
  ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFromEnv(Platform::kHost));
  ASSERT_TRUE(c.min_size_table.has_value());
  const MinSizeTableMiB& t = *c.min_size_table;
  EXPECT_EQ(t[0][0][0], 3);
  EXPECT_EQ(t[0][0][4], 7);
  EXPECT_EQ(t[1][2][0], 0);
  EXPECT_EQ(t[0][1][0], -1);  // fp16 ws4: no row
  Set("QR_MIN_SIZE_TABLE", (path + ".missing").c_str());
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("QR_MIN_SIZE_TABLE"), HasSubstr("cannot be read"))));
  // A directory opens but is no table: an error, not an empty table.
  Set("QR_MIN_SIZE_TABLE", std::getenv("TEST_TMPDIR"));
  EXPECT_THAT(LoadConfigFromEnv(Platform::kHost).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("QR_MIN_SIZE_TABLE"), HasSubstr("cannot be read"))));
}

TEST(MinSizeTableTest, MalformedRowsNameTheLine) {
  const char* bad[] = {
      "fp32 ws2 1 1 1 1 1",
      "fp16 ws3 1 1 1 1 1",
      "fp16 ws2 1 1 1 1",
      "fp16 ws2 1 1 1 1 1 1",
      "fp16 ws2 1 x 1 1 1",
      "fp16 ws2 1 -1 1 1 1",
      "fp16 ws2 1 1 1 1 1\nfp16 ws2 1 1 1 1 1",
  };
  for (const char* text : bad) {
    EXPECT_THAT(ParseMinSizeTable(text, "t.txt").status(),
                StatusIs(StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("QR_MIN_SIZE_TABLE"), HasSubstr("t.txt:"))))
        << text;
  }
  ASSERT_OK_AND_ASSIGN(MinSizeTableMiB t, ParseMinSizeTable("", "empty"));
  EXPECT_EQ(t[1][1][3], -1);
}

TEST(RegimeTest, NamesAndCodecs) {
  EXPECT_STREQ(RegimeName(Regime::kInt3), "INT3");
  EXPECT_STREQ(RegimeName(Regime::kNone), "NONE");
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(static_cast<int>(CodecForRegime(static_cast<Regime>(i))), i);
    EXPECT_STREQ(RegimeName(static_cast<Regime>(i)), CodecName(static_cast<Codec>(i)));
  }
  EXPECT_TRUE(IsValidRegime(5));
  EXPECT_FALSE(IsValidRegime(6));
  EXPECT_DEATH(CodecForRegime(Regime::kNone), "CodecForRegime");
}

}  // namespace
}  // namespace qr
