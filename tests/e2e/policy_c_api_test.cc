// The policy and the configuration through the C ABI only (comm/quickreduce.h):
// qr_should_all_reduce with no floor by default on the host backend, a
// QR_MIN_SIZE_TABLE floor, the max size, the 16-byte rule, the bf16 cast row,
// FP when nothing is set, NONE, INT3 at world size 4 and vLLM's variable names;
// qr_all_reduce running FP below QR_QUANTIZATION_MIN_SIZE_KB and the regime's
// codec above it (checked bit for bit against the reference of each codec);
// one-shot up to the built-in ceiling or QR_ONE_SHOT_MAX_KB and two-shot
// above (checked against each algorithm's reference); configuration errors
// at join; qr_last_error per thread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/quickreduce.h"
#include "tests/e2e/harness.h"
#include "tools/qr_demo_lib.h"

namespace qr::testing {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMiB = 1 << 20;

class PolicyCApiTest : public E2eTest {
 protected:
  void TearDown() override {
    for (const char* name : {"QR_QUANTIZATION", "QR_MAX_SIZE_BYTES_MB", "QR_CAST_BF16_TO_FP16",
                             "QR_QUANTIZATION_MIN_SIZE_KB", "QR_MIN_SIZE_BYTES_MB",
                             "QR_ONE_SHOT_MAX_KB", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION",
                             "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "QR_MIN_SIZE_TABLE"}) {
      ::unsetenv(name);
    }
    E2eTest::TearDown();
  }

  // Joins `ws` threads as one group through the C ABI (the environment is
  // read at join), runs fn on each, leaves.
  void OnGroup(int ws, const std::function<void(int rank, qr_comm* c)>& fn) {
    const std::string group = UniqueGroup("policy" + std::to_string(++groups_));
    std::vector<std::thread> threads;
    for (int r = 0; r < ws; ++r) {
      threads.emplace_back([&, r] {
        qr_join_options o = {nullptr, group.c_str(), r, ws, QR_DEVICE_HOST, 20000};
        qr_comm* c = nullptr;
        ASSERT_EQ(qr_join(&o, &c), QR_OK) << qr_last_error();
        fn(r, c);
        EXPECT_EQ(qr_leave(c), QR_OK) << qr_last_error();
      });
    }
    for (std::thread& t : threads) t.join();
  }

  void ExpectAlgorithms(int ws, const std::vector<size_t>& sizes,
                        const std::vector<bool>& one_shot);

  int groups_ = 0;
};

// The host backend has no built-in floor; a QR_MIN_SIZE_TABLE file (here
// with the AMD table's ws2 rows) sets one through the C ABI.
TEST_F(PolicyCApiTest, MinSizeTableMaxSizeAndSixteenByteRule) {
  ::setenv("QR_QUANTIZATION", "INT8", 1);
  ::setenv("QR_MAX_SIZE_BYTES_MB", "16", 1);
  OnGroup(2, [](int, qr_comm* c) {
    EXPECT_EQ(qr_should_all_reduce(c, 16, QR_FLOAT16), 1);  // no floor on the host backend
    EXPECT_EQ(qr_should_all_reduce(c, 16 * kMiB + 16, QR_FLOAT16), 0);
  });
  const std::string table = dir_ + "/min_size_table.txt";
  ASSERT_TRUE(WriteFile(table, "fp16 ws2 1 2 2 1 1\nbf16 ws2 2 8 8 8 8\n"));
  ::setenv("QR_MIN_SIZE_TABLE", table.c_str(), 1);
  ::setenv("QR_CAST_BF16_TO_FP16", "1", 1);
  OnGroup(2, [](int, qr_comm* c) {
    // fp16, ws 2, INT8: 2 MiB floor.
    EXPECT_EQ(qr_should_all_reduce(c, 2 * kMiB - 16, QR_FLOAT16), 0);
    EXPECT_EQ(qr_should_all_reduce(c, 2 * kMiB, QR_FLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 2 * kMiB + 8, QR_FLOAT16), 0);
    EXPECT_EQ(qr_should_all_reduce(c, 16 * kMiB, QR_FLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 16 * kMiB + 16, QR_FLOAT16), 0);
    // bf16 with the cast on uses the fp16 row.
    EXPECT_EQ(qr_should_all_reduce(c, 2 * kMiB, QR_BFLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 2 * kMiB, static_cast<qr_dtype>(7)), 0);
  });
  EXPECT_EQ(qr_should_all_reduce(nullptr, 2 * kMiB, QR_FLOAT16), 0);
}

TEST_F(PolicyCApiTest, Bf16RowWhenCastIsOff) {
  const std::string table = dir_ + "/min_size_table.txt";
  ASSERT_TRUE(WriteFile(table, "fp16 ws2 1 2 2 1 1\nbf16 ws2 2 8 8 8 8\n"));
  ::setenv("QR_MIN_SIZE_TABLE", table.c_str(), 1);
  ::setenv("QR_QUANTIZATION", "INT8", 1);
  ::setenv("QR_CAST_BF16_TO_FP16", "0", 1);
  OnGroup(2, [](int, qr_comm* c) {
    EXPECT_EQ(qr_should_all_reduce(c, 4 * kMiB, QR_BFLOAT16), 0);  // bf16 ws2 INT8: 8 MiB
    EXPECT_EQ(qr_should_all_reduce(c, 8 * kMiB, QR_BFLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 2 * kMiB, QR_FLOAT16), 1);
  });
}

TEST_F(PolicyCApiTest, VllmNamesAndMinSizeOverride) {
  ::setenv("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "INT4", 1);
  ::setenv("VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "0", 1);
  OnGroup(4, [](int, qr_comm* c) {
    EXPECT_EQ(qr_should_all_reduce(c, 16, QR_FLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 16, QR_BFLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 24, QR_FLOAT16), 0);
  });
}

// With nothing set the host backend takes small calls and runs them FP;
// QR_QUANTIZATION=NONE, set explicitly, declines everything.
TEST_F(PolicyCApiTest, UnsetRunsFpEverywhereAndNoneDeclinesEverything) {
  OnGroup(2, [](int rank, qr_comm* c) {
    EXPECT_EQ(qr_should_all_reduce(c, 16 << 10, QR_FLOAT16), 1);
    EXPECT_EQ(qr_should_all_reduce(c, 16 << 10, QR_BFLOAT16), 1);
    std::vector<uint16_t> buf(8192, rank == 0 ? 0x3c00 : 0x4000);  // fp16 1 and 2
    EXPECT_EQ(qr_all_reduce(c, buf.data(), buf.data(), buf.size(), QR_FLOAT16, nullptr), QR_OK)
        << qr_last_error();
    EXPECT_EQ(buf[4321], 0x4200);  // 3
  });
  ::setenv("QR_QUANTIZATION", "NONE", 1);
  OnGroup(2, [](int, qr_comm* c) {
    EXPECT_EQ(qr_should_all_reduce(c, 64 * kMiB, QR_FLOAT16), 0);
    std::vector<uint16_t> buf(64);
    EXPECT_EQ(qr_all_reduce(c, buf.data(), buf.data(), buf.size(), QR_FLOAT16, nullptr),
              QR_UNSUPPORTED);
    EXPECT_THAT(qr_last_error(), HasSubstr("QR_QUANTIZATION"));
  });
}

TEST_F(PolicyCApiTest, Int3OnlyAtWorldSizeTwo) {
  ::setenv("QR_QUANTIZATION", "INT3", 1);
  OnGroup(4, [](int, qr_comm* c) {
    EXPECT_EQ(qr_should_all_reduce(c, 64 * kMiB, QR_FLOAT16), 0);
    std::vector<uint16_t> buf(64);
    EXPECT_EQ(qr_all_reduce(c, buf.data(), buf.data(), buf.size(), QR_FLOAT16, nullptr),
              QR_UNSUPPORTED);
    EXPECT_THAT(qr_last_error(), HasSubstr("INT3"));
  });
  OnGroup(2, [](int, qr_comm* c) { EXPECT_EQ(qr_should_all_reduce(c, 1 * kMiB, QR_FLOAT16), 1); });
}

// qr_all_reduce with QR_QUANTIZATION=INT8 and a 64 KiB threshold: 32 KiB
// calls must give exactly the FP reference's bits, 128 KiB calls exactly
// INT8's (and the two differ on this data, so the check can fail). Two-shot
// only: one-shot would make both exact.
TEST_F(PolicyCApiTest, AllReduceUsesFpBelowTheQuantizationThreshold) {
  ::setenv("QR_QUANTIZATION", "INT8", 1);
  ::setenv("QR_QUANTIZATION_MIN_SIZE_KB", "64", 1);
  ::setenv("QR_ONE_SHOT_MAX_KB", "0", 1);
  std::vector<uint16_t> small[2], big[2];
  OnGroup(2, [&](int rank, qr_comm* c) {
    for (auto* v : {&small[rank], &big[rank]}) {
      const int64_t n = v == &small[rank] ? 16384 : 65536;
      std::vector<uint16_t> in(static_cast<size_t>(n));
      demo::FillInput(DType::kFloat16, rank, 5, n, in.data());
      v->assign(in.size(), 0);
      EXPECT_EQ(qr_all_reduce(c, in.data(), v->data(), in.size(), QR_FLOAT16, nullptr), QR_OK)
          << qr_last_error();
    }
  });
  kernels::TwoShotParams p;
  p.world_size = 2;
  p.dtype = DType::kFloat16;
  p.num_elems = 16384;
  p.codec = Codec::kFp;
  EXPECT_TRUE(demo::Verify(p, 5, small[0].data()).bit_identical) << "32 KiB did not run FP";
  p.codec = Codec::kInt8;
  EXPECT_FALSE(demo::Verify(p, 5, small[0].data()).bit_identical);
  p.num_elems = 65536;
  EXPECT_TRUE(demo::Verify(p, 5, big[0].data()).bit_identical) << "128 KiB did not run INT8";
  p.codec = Codec::kFp;
  EXPECT_FALSE(demo::Verify(p, 5, big[0].data()).bit_identical);
  EXPECT_EQ(small[0], small[1]);
  EXPECT_EQ(big[0], big[1]);
}

// qr_all_reduce (configured regime INT4) of `sizes` bytes on `ws` threads;
// `one_shot[i]` says which algorithm size i must have run, written out here
// independently of comm/policy.cc. A one-shot result equals the one-shot
// reference (exact, FP's bits) and not INT4's two-shot; a two-shot result
// the reverse, so a call that ran the other algorithm fails.
void PolicyCApiTest::ExpectAlgorithms(int ws, const std::vector<size_t>& sizes,
                                      const std::vector<bool>& one_shot) {
  std::vector<std::vector<std::vector<uint16_t>>> out(
      static_cast<size_t>(ws), std::vector<std::vector<uint16_t>>(sizes.size()));
  OnGroup(ws, [&](int rank, qr_comm* c) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = static_cast<int64_t>(sizes[i] / 2);
      std::vector<uint16_t> in(static_cast<size_t>(n));
      demo::FillInput(DType::kFloat16, rank, 11 + i, n, in.data());
      out[rank][i].assign(in.size(), 0);
      ASSERT_EQ(qr_all_reduce(c, in.data(), out[rank][i].data(), in.size(), QR_FLOAT16, nullptr),
                QR_OK)
          << qr_last_error();
    }
  });
  for (size_t i = 0; i < sizes.size(); ++i) {
    kernels::TwoShotParams p;
    p.world_size = ws;
    p.dtype = DType::kFloat16;
    p.codec = Codec::kInt4;
    p.num_elems = static_cast<int64_t>(sizes[i] / 2);
    const Algorithm want = one_shot[i] ? Algorithm::kOneShot : Algorithm::kTwoShot;
    const Algorithm other = one_shot[i] ? Algorithm::kTwoShot : Algorithm::kOneShot;
    const std::string label = "ws " + std::to_string(ws) + ", " + std::to_string(sizes[i]) +
                              " bytes should run " + AlgorithmName(want);
    const demo::Verdict v = demo::Verify(p, 11 + i, out[0][i].data(), want);
    EXPECT_TRUE(v.ok()) << label << ": " << v.Describe();
    EXPECT_FALSE(demo::Verify(p, 11 + i, out[0][i].data(), other).bit_identical) << label;
    for (int r = 1; r < ws; ++r) EXPECT_EQ(out[r][i], out[0][i]) << label << ", rank " << r;
  }
}

TEST_F(PolicyCApiTest, OneShotUpToTheBuiltInCeilingTwoShotAbove) {
  ::setenv("QR_QUANTIZATION", "INT4", 1);
  // The documented built-in ceilings of fp16 INT4 (comm/policy.cc,
  // docs/codecs.md): 3 MiB at world size 2, where its two-shot is faster.
  for (const auto& [ws, ceiling] :
       {std::pair<int, size_t>{2, 3072 << 10}, {4, 1024 << 10}, {8, 256 << 10}}) {
    ExpectAlgorithms(ws, {8192, ceiling, ceiling + 16, 2 * ceiling}, {true, true, false, false});
  }
}

TEST_F(PolicyCApiTest, OneShotCeilingFromTheEnvironment) {
  ::setenv("QR_QUANTIZATION", "INT4", 1);
  ::setenv("QR_ONE_SHOT_MAX_KB", "64", 1);
  ExpectAlgorithms(2, {64 << 10, (64 << 10) + 16, 256 << 10}, {true, false, false});
  ::setenv("QR_ONE_SHOT_MAX_KB", "0", 1);  // one-shot off
  ExpectAlgorithms(2, {4096, 64 << 10}, {false, false});
}

TEST_F(PolicyCApiTest, BadConfigurationFailsJoinNamingTheVariable) {
  ::setenv("QR_QUANTIZATION", "INT9", 1);
  qr_join_options o = {nullptr, "policy-bad", 0, 2, QR_DEVICE_HOST, 1000};
  qr_comm* c = reinterpret_cast<qr_comm*>(&o);
  EXPECT_EQ(qr_join(&o, &c), QR_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);
  EXPECT_THAT(qr_last_error(), HasSubstr("QR_QUANTIZATION"));
  ::setenv("QR_QUANTIZATION", "INT8", 1);
  ::setenv("QR_MAX_SIZE_BYTES_MB", "-3", 1);
  EXPECT_EQ(qr_join(&o, &c), QR_INVALID_ARGUMENT);
  EXPECT_THAT(qr_last_error(), HasSubstr("QR_MAX_SIZE_BYTES_MB"));
}

TEST_F(PolicyCApiTest, LastErrorIsPerThread) {
  EXPECT_EQ(qr_check(nullptr), QR_INVALID_ARGUMENT);
  const std::string mine = qr_last_error();
  EXPECT_THAT(mine, HasSubstr("NULL"));
  std::thread([] {
    EXPECT_STREQ(qr_last_error(), "");
    EXPECT_EQ(qr_leave(nullptr), QR_OK);
    EXPECT_STREQ(qr_last_error(), "");
  }).join();
  EXPECT_EQ(qr_last_error(), mine);
}

}  // namespace
}  // namespace qr::testing

int main(int argc, char** argv) { return qr::testing::E2eMain(argc, argv, {}); }
