#include "comm/policy.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/one_shot_reference.h"
#include "tests/util/status_matchers.h"

namespace qr {
namespace {

using ::testing::HasSubstr;

constexpr Regime kCodecRegimes[] = {Regime::kFp, Regime::kInt8, Regime::kInt6, Regime::kInt4,
                                    Regime::kInt3};

struct Row {
  DType dtype;
  int ws;
  int64_t mib[5];  // FP, INT8, INT6, INT4, INT3
};

// DESIGN.md's table (vLLM's MI300X rows, AMD's built-in table), written out
// independently of policy.cc.
constexpr Row kTable[] = {
    {DType::kFloat16, 2, {1, 2, 2, 1, 1}},      {DType::kFloat16, 4, {1, 16, 4, 2, 2}},
    {DType::kFloat16, 8, {16, 4, 4, 2, 2}},     {DType::kBFloat16, 2, {2, 8, 8, 8, 8}},
    {DType::kBFloat16, 4, {8, 64, 64, 16, 16}}, {DType::kBFloat16, 8, {16, 2048, 2048, 2048, 2048}},
};

// An AMD group's config: the platform whose built-in table has floors.
Config ConfigFor(Regime regime, bool cast) {
  Config c;
  c.platform = Platform::kAmd;
  c.regime = regime;
  c.cast_bf16_to_fp16 = cast;
  return c;
}

const Row& FindRow(DType dtype, int ws) {
  for (const Row& r : kTable) {
    if (r.dtype == dtype && r.ws == ws) return r;
  }
  return kTable[0];
}

TEST(PolicyTest, MinSizeTableEveryRow) {
  for (const Row& row : kTable) {
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(MinSizeBytes(Platform::kAmd, row.dtype, row.ws, kCodecRegimes[i], /*cast=*/false),
                row.mib[i] << 20)
          << DTypeName(row.dtype) << " ws" << row.ws << " " << RegimeName(kCodecRegimes[i]);
    }
  }
}

TEST(PolicyTest, Bf16WithCastUsesTheFp16Row) {
  for (int ws : {2, 4, 8}) {
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(MinSizeBytes(Platform::kAmd, DType::kBFloat16, ws, kCodecRegimes[i], true),
                FindRow(DType::kFloat16, ws).mib[i] << 20);
      // fp16 ignores the cast flag.
      EXPECT_EQ(MinSizeBytes(Platform::kAmd, DType::kFloat16, ws, kCodecRegimes[i], true),
                FindRow(DType::kFloat16, ws).mib[i] << 20);
    }
  }
}

TEST(PolicyTest, NeverEligibleForNoneOrBadWorldSize) {
  for (Platform p : {Platform::kHost, Platform::kNvidia, Platform::kAmd}) {
    EXPECT_EQ(MinSizeBytes(p, DType::kFloat16, 2, Regime::kNone, false), kNeverEligible);
    EXPECT_EQ(MinSizeBytes(p, DType::kFloat16, 3, Regime::kFp, false), kNeverEligible);
    EXPECT_EQ(MinSizeBytes(p, DType::kFloat16, 16, Regime::kFp, false), kNeverEligible);
  }
}

// NVIDIA Hopper: qr-bench derived 0 in every cell on 2 x H200
// (docs/perf/*-h200x2-min_size_table.txt); the host backend has no floor.
TEST(PolicyTest, NoFloorOnNvidiaOrTheHost) {
  for (Platform p : {Platform::kHost, Platform::kNvidia}) {
    for (const Row& row : kTable) {
      for (bool cast : {false, true}) {
        for (Regime regime : kCodecRegimes) {
          EXPECT_EQ(MinSizeBytes(p, row.dtype, row.ws, regime, cast), 0)
              << PlatformName(p) << " " << DTypeName(row.dtype) << " ws" << row.ws << " "
              << RegimeName(regime) << (cast ? " cast" : "");
        }
      }
    }
  }
}

// The acceptance: with nothing set, a 16 KiB fp16 message at world
// size 2 is taken on a GPU group on NVIDIA and on the host backend, while
// AMD keeps vLLM's 1 MiB floor for it.
TEST(PolicyTest, UnsetEnvironmentTakesSmallMessagesOnNvidiaAndTheHost) {
  for (const char* v :
       {"QR_QUANTIZATION", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "QR_CAST_BF16_TO_FP16",
        "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "QR_MIN_SIZE_BYTES_MB",
        "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "QR_MAX_SIZE_BYTES_MB",
        "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", "QR_MIN_SIZE_TABLE"}) {
    ::unsetenv(v);
  }
  std::string why;
  for (Platform p : {Platform::kNvidia, Platform::kHost}) {
    ASSERT_OK_AND_ASSIGN(const Config c, LoadConfigFromEnv(p));
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (int ws : {2, 4, 8}) {
        EXPECT_TRUE(ShouldAllReduce(c, 16 << 10, dtype, ws, &why))
            << PlatformName(p) << " " << DTypeName(dtype) << " ws" << ws << ": " << why;
      }
    }
    EXPECT_TRUE(ShouldAllReduce(c, 16, DType::kFloat16, 2, &why)) << why;
  }
  ASSERT_OK_AND_ASSIGN(const Config amd, LoadConfigFromEnv(Platform::kAmd));
  EXPECT_FALSE(ShouldAllReduce(amd, 16 << 10, DType::kFloat16, 2, &why));
  EXPECT_THAT(why, HasSubstr("the built-in AMD min-size table"));
  EXPECT_TRUE(ShouldAllReduce(amd, 1 << 20, DType::kFloat16, 2, &why)) << why;
  // bf16 goes through fp16 on AMD by default, so the fp16 row's 1 MiB applies.
  EXPECT_TRUE(ShouldAllReduce(amd, 1 << 20, DType::kBFloat16, 2, &why)) << why;
}

// Every table entry, every boundary: min, min - 16, max, max + 16, and a
// size that is not a multiple of 16.
TEST(PolicyTest, BoundariesForEveryTableEntry) {
  for (const Row& row : kTable) {
    for (bool cast : {false, true}) {
      for (int i = 0; i < 5; ++i) {
        const Regime regime = kCodecRegimes[i];
        if (regime == Regime::kInt3 && row.ws != 2) continue;
        const Config c = ConfigFor(regime, cast);
        const DType row_dtype =
            (row.dtype == DType::kBFloat16 && cast) ? DType::kFloat16 : row.dtype;
        const size_t min = static_cast<size_t>(FindRow(row_dtype, row.ws).mib[i]) << 20;
        const size_t max = static_cast<size_t>(c.max_size_bytes);
        const std::string label = std::string(DTypeName(row.dtype)) + " ws" +
                                  std::to_string(row.ws) + " " + RegimeName(regime) +
                                  (cast ? " cast" : "");
        std::string why;
        EXPECT_TRUE(ShouldAllReduce(c, min, row.dtype, row.ws, &why)) << label << why;
        EXPECT_FALSE(ShouldAllReduce(c, min - 16, row.dtype, row.ws, &why)) << label;
        EXPECT_THAT(why, HasSubstr("below the minimum"));
        EXPECT_TRUE(ShouldAllReduce(c, max, row.dtype, row.ws)) << label;
        EXPECT_FALSE(ShouldAllReduce(c, max + 16, row.dtype, row.ws, &why)) << label;
        EXPECT_THAT(why, HasSubstr("above the maximum"));
        if (min < max) {
          EXPECT_FALSE(ShouldAllReduce(c, min + 8, row.dtype, row.ws, &why)) << label;
          EXPECT_THAT(why, HasSubstr("multiple of 16"));
        }
      }
    }
  }
}

TEST(PolicyTest, NoneDeclines) {
  std::string why;
  EXPECT_FALSE(ShouldAllReduce(ConfigFor(Regime::kNone, true), 64 << 20, DType::kFloat16, 2, &why));
  EXPECT_THAT(why, HasSubstr("NONE"));
}

TEST(PolicyTest, Int3OnlyAtWorldSizeTwo) {
  const Config c = ConfigFor(Regime::kInt3, true);
  std::string why;
  EXPECT_TRUE(ShouldAllReduce(c, 64 << 20, DType::kFloat16, 2, &why));
  for (int ws : {4, 8}) {
    EXPECT_FALSE(ShouldAllReduce(c, 64 << 20, DType::kFloat16, ws, &why));
    EXPECT_THAT(why, HasSubstr("INT3 is only supported at world size 2"));
  }
}

TEST(PolicyTest, BadArgumentsDecline) {
  const Config c = ConfigFor(Regime::kInt4, true);
  std::string why;
  EXPECT_FALSE(ShouldAllReduce(c, 64 << 20, static_cast<DType>(7), 2, &why));
  EXPECT_THAT(why, HasSubstr("dtype"));
  EXPECT_FALSE(ShouldAllReduce(c, 64 << 20, DType::kFloat16, 6, &why));
  EXPECT_THAT(why, HasSubstr("world size 6"));
}

TEST(PolicyTest, MinSizeOverrideReplacesTheTable) {
  Config c = ConfigFor(Regime::kInt8, false);
  c.min_size_bytes_override = 0;  // no floor
  EXPECT_TRUE(ShouldAllReduce(c, 16, DType::kBFloat16, 8));
  EXPECT_FALSE(ShouldAllReduce(c, 8, DType::kBFloat16, 8));
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kBFloat16, 8), 0);
  c.min_size_bytes_override = 3 << 20;
  EXPECT_TRUE(ShouldAllReduce(c, 3 << 20, DType::kFloat16, 4));
  EXPECT_FALSE(ShouldAllReduce(c, (3 << 20) - 16, DType::kFloat16, 4));
  c.max_size_bytes = 4 << 20;
  EXPECT_TRUE(ShouldAllReduce(c, 4 << 20, DType::kFloat16, 4));
  EXPECT_FALSE(ShouldAllReduce(c, (4 << 20) + 16, DType::kFloat16, 4));
}

TEST(PolicyTest, TableFileRowsReplaceBuiltInRows) {
  MinSizeTableMiB table;
  for (auto& by_ws : table) {
    for (auto& row : by_ws) row.fill(-1);
  }
  table[0][1] = {5, 6, 7, 8, 9};  // fp16 ws4
  Config c = ConfigFor(Regime::kInt4, true);
  c.min_size_table = table;
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kFloat16, 4), 8 << 20);
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kBFloat16, 4), 8 << 20);  // cast: fp16 row
  EXPECT_TRUE(ShouldAllReduce(c, 8 << 20, DType::kFloat16, 4));
  EXPECT_FALSE(ShouldAllReduce(c, (8 << 20) - 16, DType::kFloat16, 4));
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kFloat16, 2), 1 << 20);  // no row: built-in
  c.cast_bf16_to_fp16 = false;
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kBFloat16, 4), 16 << 20);  // bf16 ws4: built-in
  c.min_size_bytes_override = 0;                                       // QR_MIN_SIZE_BYTES_MB wins
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kFloat16, 4), 0);
  // Over NVIDIA's floor-less table too (qr-bench output for another machine).
  c.min_size_bytes_override.reset();
  c.platform = Platform::kNvidia;
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kFloat16, 4), 8 << 20);
  EXPECT_EQ(EffectiveMinSizeBytes(c, DType::kFloat16, 2), 0);  // no row: built-in
  std::string why;
  EXPECT_FALSE(ShouldAllReduce(c, 16 << 10, DType::kFloat16, 4, &why));
  EXPECT_THAT(why, HasSubstr("QR_MIN_SIZE_TABLE"));
}

TEST(PolicyTest, FpBelowTheQuantizationThreshold) {
  Config c = ConfigFor(Regime::kInt4, true);
  EXPECT_EQ(EffectiveCodec(c, Regime::kInt4, 16), Codec::kInt4);  // no threshold set
  c.quantization_min_size_bytes = 256 << 10;
  EXPECT_EQ(EffectiveCodec(c, Regime::kInt4, (256 << 10) - 16), Codec::kFp);
  EXPECT_EQ(EffectiveCodec(c, Regime::kInt4, 256 << 10), Codec::kInt4);
  EXPECT_EQ(EffectiveCodec(c, Regime::kInt3, 1 << 30), Codec::kInt3);
  EXPECT_EQ(EffectiveCodec(c, Regime::kFp, 1 << 30), Codec::kFp);
  // The threshold changes the codec, not eligibility.
  c.min_size_bytes_override = 0;
  EXPECT_TRUE(ShouldAllReduce(c, 1024, DType::kFloat16, 2));
}

// The built-in ceilings, written out independently of policy.cc.
constexpr std::pair<int, int64_t> kOneShotCeilings[] = {
    {2, 4096 << 10}, {4, 1024 << 10}, {8, 256 << 10}};

// The per-codec ceiling policy.cc's comment derives from the 2 x H200 tables:
// fp16 INT4 and INT3 at world size 2 stop at 3 MiB; everything else takes the
// world size's ceiling.
int64_t ExpectedCap(int ws, WorkFormat format, Codec codec) {
  const bool capped =
      ws == 2 && format == WorkFormat::kFp16 && (codec == Codec::kInt4 || codec == Codec::kInt3);
  return capped ? int64_t{3} << 20 : std::numeric_limits<int64_t>::max();
}

TEST(PolicyTest, DefaultOneShotCeilingPerWorldSize) {
  for (const auto& [ws, bytes] : kOneShotCeilings) EXPECT_EQ(DefaultOneShotMaxBytes(ws), bytes);
  for (int ws : {0, 1, 3, 6, 16}) EXPECT_EQ(DefaultOneShotMaxBytes(ws), 0) << ws;
}

TEST(PolicyTest, DefaultOneShotCeilingPerCodec) {
  for (const auto& [ws, bytes] : kOneShotCeilings) {
    for (WorkFormat f : kAllWorkFormats) {
      for (Codec k : kAllCodecs) {
        EXPECT_EQ(DefaultOneShotMaxBytes(ws, f, k), std::min(bytes, ExpectedCap(ws, f, k)))
            << ws << " " << WorkFormatName(f) << " " << CodecName(k);
      }
    }
  }
  EXPECT_EQ(DefaultOneShotMaxBytes(2, WorkFormat::kFp16, Codec::kInt4), 3 << 20);
  EXPECT_EQ(DefaultOneShotMaxBytes(2, WorkFormat::kBf16Cast, Codec::kInt4), 4 << 20);
  for (int ws : {0, 3, 16}) EXPECT_EQ(DefaultOneShotMaxBytes(ws, WorkFormat::kFp16, Codec::kFp), 0);
}

TEST(PolicyTest, OneShotUpToTheCeilingTwoShotAbove) {
  const Config c = ConfigFor(Regime::kInt4, true);
  for (const auto& [ws, ceiling] : kOneShotCeilings) {
    for (WorkFormat f : kAllWorkFormats) {
      for (Codec k : kAllCodecs) {
        SCOPED_TRACE(std::to_string(ws) + " " + WorkFormatName(f) + " " + CodecName(k));
        const size_t max = static_cast<size_t>(std::min(ceiling, ExpectedCap(ws, f, k)));
        EXPECT_EQ(ChooseAlgorithm(c, 16, ws, f, k), Algorithm::kOneShot);
        EXPECT_EQ(ChooseAlgorithm(c, max - 16, ws, f, k), Algorithm::kOneShot);
        EXPECT_EQ(ChooseAlgorithm(c, max, ws, f, k), Algorithm::kOneShot);
        EXPECT_EQ(ChooseAlgorithm(c, max + 16, ws, f, k), Algorithm::kTwoShot);
        EXPECT_EQ(ChooseAlgorithm(c, 64 << 20, ws, f, k), Algorithm::kTwoShot);
        // Nothing to send is never a one-shot call.
        EXPECT_EQ(ChooseAlgorithm(c, 0, ws, f, k), Algorithm::kTwoShot);
      }
    }
  }
  for (int ws : {0, 3, 16}) {
    EXPECT_EQ(ChooseAlgorithm(c, 16, ws, WorkFormat::kFp16, Codec::kFp), Algorithm::kTwoShot) << ws;
  }
}

// The cells the cap rests on: fp16 INT4/INT3 at 3.5 and 4 MiB go two-shot,
// at 2 and 3 MiB one-shot; every other codec and format stays one-shot to 4 MiB.
TEST(PolicyTest, Fp16Int4AndInt3TakeTwoShotAboveThreeMiB) {
  const Config c;
  for (Codec k : {Codec::kInt4, Codec::kInt3}) {
    EXPECT_EQ(ChooseAlgorithm(c, 2 << 20, 2, WorkFormat::kFp16, k), Algorithm::kOneShot);
    EXPECT_EQ(ChooseAlgorithm(c, 3 << 20, 2, WorkFormat::kFp16, k), Algorithm::kOneShot);
    EXPECT_EQ(ChooseAlgorithm(c, (3 << 20) + 16, 2, WorkFormat::kFp16, k), Algorithm::kTwoShot);
    EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kFp16, k), Algorithm::kTwoShot);
    EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kBf16, k), Algorithm::kOneShot);
    EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kBf16Cast, k), Algorithm::kOneShot);
    // The cap is measured at world size 2 only.
    EXPECT_EQ(ChooseAlgorithm(c, 1 << 20, 4, WorkFormat::kFp16, k), Algorithm::kOneShot);
  }
  for (Codec k : {Codec::kFp, Codec::kInt8, Codec::kInt6}) {
    EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kFp16, k), Algorithm::kOneShot);
  }
}

TEST(PolicyTest, OneShotCeilingOverrideCapsEveryCodec) {
  Config c = ConfigFor(Regime::kFp, true);
  c.one_shot_max_bytes = 64 << 10;
  for (int ws : {2, 4, 8}) {
    for (WorkFormat f : kAllWorkFormats) {
      for (Codec k : kAllCodecs) {
        EXPECT_EQ(ChooseAlgorithm(c, 64 << 10, ws, f, k), Algorithm::kOneShot) << ws;
        EXPECT_EQ(ChooseAlgorithm(c, (64 << 10) + 16, ws, f, k), Algorithm::kTwoShot) << ws;
      }
    }
  }
  c.one_shot_max_bytes = 0;  // QR_ONE_SHOT_MAX_KB=0: one-shot off
  for (int ws : {2, 4, 8}) {
    for (Codec k : kAllCodecs) {
      EXPECT_EQ(ChooseAlgorithm(c, 16, ws, WorkFormat::kFp16, k), Algorithm::kTwoShot) << ws;
      EXPECT_EQ(ChooseAlgorithm(c, 0, ws, WorkFormat::kFp16, k), Algorithm::kTwoShot) << ws;
    }
  }
  // An override above a codec's cap does not lift it: the cap stays, and
  // the other codecs follow the override.
  c.one_shot_max_bytes = 4 << 20;
  EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kFp16, Codec::kInt4), Algorithm::kTwoShot);
  EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kFp16, Codec::kInt8), Algorithm::kOneShot);
  c.one_shot_max_bytes = 2 << 20;  // at world size 4 above the built-in 1 MiB
  EXPECT_EQ(ChooseAlgorithm(c, 2 << 20, 4, WorkFormat::kFp16, Codec::kInt4), Algorithm::kOneShot);
  EXPECT_EQ(ChooseAlgorithm(c, 2 << 20, 2, WorkFormat::kFp16, Codec::kInt4), Algorithm::kOneShot);
}

// An override above what one source's share of the one-shot region holds
// (kernels/one_shot_reference.h) is clamped to it.
TEST(PolicyTest, OneShotCeilingIsClampedToTheRegion) {
  Config c = ConfigFor(Regime::kInt8, false);
  c.one_shot_max_bytes = int64_t{1} << 40;
  for (int ws : {2, 4, 8}) {
    const size_t region = static_cast<size_t>(kernels::OneShotMaxElems(ws)) * 2;
    EXPECT_GE(region, static_cast<size_t>(DefaultOneShotMaxBytes(ws))) << ws;
    EXPECT_EQ(ChooseAlgorithm(c, region, ws, WorkFormat::kBf16, Codec::kInt8), Algorithm::kOneShot)
        << ws;
    EXPECT_EQ(ChooseAlgorithm(c, region + 16, ws, WorkFormat::kBf16, Codec::kInt8),
              Algorithm::kTwoShot)
        << ws;
  }
}

// The ceiling the members of a group compare at join (Communicator::Join):
// what ChooseAlgorithm uses, after the override and the region clamp.
TEST(PolicyTest, OneShotCeilingBytesIsWhatChooseAlgorithmUses) {
  Config c = ConfigFor(Regime::kFp, true);
  for (int ws : {2, 4, 8}) {
    EXPECT_EQ(OneShotCeilingBytes(c, ws), static_cast<uint64_t>(DefaultOneShotMaxBytes(ws))) << ws;
  }
  EXPECT_EQ(OneShotCeilingBytes(c, 2), 4u << 20);
  c.one_shot_max_bytes = 64 << 10;
  EXPECT_EQ(OneShotCeilingBytes(c, 4), 64u << 10);
  c.one_shot_max_bytes = 0;
  EXPECT_EQ(OneShotCeilingBytes(c, 8), 0u);
  c.one_shot_max_bytes = int64_t{1} << 40;
  EXPECT_EQ(OneShotCeilingBytes(c, 2), static_cast<uint64_t>(kernels::OneShotMaxElems(2)) * 2);
  for (int ws : {0, 3, 16}) {
    EXPECT_EQ(OneShotCeilingBytes(c, ws), 0u) << ws;
    EXPECT_EQ(OneShotCeilingBytes(c, ws, WorkFormat::kFp16, Codec::kInt4), 0u) << ws;
  }
}

// Join compares OneShotCeilingBytes(config, ws) only: every call's ceiling
// must follow from it, so configs that pass the check agree on every call.
// (Unset and QR_ONE_SHOT_MAX_KB=4096 both give 4 MiB at world size 2; they
// must then agree on fp16 INT4 too.)
TEST(PolicyTest, AgreeingOnTheJoinCeilingMeansAgreeingOnEveryCall) {
  std::vector<Config> configs(1);
  for (int64_t kib : {0, 4, 64, 1024, 2048, 3072, 4096, 8192, 1 << 20}) {
    Config c;
    c.one_shot_max_bytes = kib * 1024;
    configs.push_back(c);
  }
  for (int ws : {2, 4, 8}) {
    for (const Config& a : configs) {
      for (const Config& b : configs) {
        if (OneShotCeilingBytes(a, ws) != OneShotCeilingBytes(b, ws)) continue;
        for (WorkFormat f : kAllWorkFormats) {
          for (Codec k : kAllCodecs) {
            EXPECT_EQ(OneShotCeilingBytes(a, ws, f, k), OneShotCeilingBytes(b, ws, f, k));
            EXPECT_LE(OneShotCeilingBytes(a, ws, f, k), OneShotCeilingBytes(a, ws));
          }
        }
      }
    }
  }
  Config unset, set;
  set.one_shot_max_bytes = 4096 * 1024;
  ASSERT_EQ(OneShotCeilingBytes(unset, 2), OneShotCeilingBytes(set, 2));
  EXPECT_EQ(OneShotCeilingBytes(set, 2, WorkFormat::kFp16, Codec::kInt4), 3u << 20);
}

// The regime in the config and the cast flag do not enter: the call's work
// format and codec do.
TEST(PolicyTest, AlgorithmDependsOnTheCallsFormatAndCodecNotTheConfigsRegime) {
  for (Regime regime : kCodecRegimes) {
    for (bool cast : {false, true}) {
      const Config c = ConfigFor(regime, cast);
      EXPECT_EQ(ChooseAlgorithm(c, 4096, 2, WorkFormat::kFp16, Codec::kInt4), Algorithm::kOneShot);
      EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kFp16, Codec::kInt4),
                Algorithm::kTwoShot);
      EXPECT_EQ(ChooseAlgorithm(c, 4 << 20, 2, WorkFormat::kFp16, Codec::kFp), Algorithm::kOneShot);
      EXPECT_EQ(ChooseAlgorithm(c, 8 << 20, 2, WorkFormat::kFp16, Codec::kFp), Algorithm::kTwoShot);
    }
  }
}

}  // namespace
}  // namespace qr
