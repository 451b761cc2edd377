// Runs the fuzz target's checks without libFuzzer (so CI's gcc build covers
// it): valid frames of every type, their truncations and byte mutations, and
// random noise.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "ipc/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace qr::ipc {
namespace {

std::vector<std::vector<uint8_t>> Seeds() {
  JoinRequest j;
  j.group = "g";
  j.rank = 1;
  j.world_size = 2;
  j.device_id = "host";
  j.timeout_ms = 10;
  JoinRequest shared = j;
  shared.allow_shared_device = true;
  std::vector<Message> msgs = {
      j, shared, PublishedNotice{}, LeaveRequest{}, AbortRequest{"why"},
      // Non-ASCII: UTF-8 of 2, 3 and 4 bytes at the
      // length limit, and bytes that are not UTF-8.
      AbortRequest{std::string(85 * 3, 'x')
                       .replace(0, 255,
                                [] {
                                  std::string e;
                                  for (int i = 0; i < 85; ++i) e += "\xE2\x82\xAC";
                                  return e;
                                }())},
      AbortRequest{"\xC3\xBC\xF0\x9F\x98\x80\xff\xfe\xc0\xaf"},
      ErrorReply{3, "\xED\xA0\x80 surrogate, \x1b[2J"}, GroupFailedNotice{std::string(255, '\xC3')},
      StatusRequest{}, JoinOk{"/quickreduce-0-g-1", 1, 1, 7}, ReadyNotice{1},
      GroupFailedNotice{"dead"}, LeaveOk{}, StatusReply{"{}"}, ErrorReply{3, "late"}};
  std::vector<std::vector<uint8_t>> out;
  for (const auto& m : msgs) out.push_back(*EncodeFrame(m));
  return out;
}

TEST(WireFuzzReplayTest, MutationsOfValidFramesAndNoise) {
  std::mt19937 rng(7);
  int runs = 0;
  for (const auto& seed : Seeds()) {
    for (size_t cut = 0; cut <= seed.size(); ++cut, ++runs) {
      LLVMFuzzerTestOneInput(seed.data(), cut);
    }
    for (int i = 0; i < 2000; ++i, ++runs) {
      std::vector<uint8_t> m = seed;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<uint8_t>(rng());
      LLVMFuzzerTestOneInput(m.data(), m.size());
    }
  }
  for (int i = 0; i < 20000; ++i, ++runs) {
    std::vector<uint8_t> noise(rng() % 128);
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    LLVMFuzzerTestOneInput(noise.data(), noise.size());
  }
  EXPECT_GT(runs, 40000);
}

}  // namespace
}  // namespace qr::ipc
