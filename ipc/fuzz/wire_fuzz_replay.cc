// Runs the wire fuzz target's checks without libFuzzer (replay_driver.h):
// valid frames of every type, their truncations and byte mutations, and
// random noise.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "ipc/fuzz/replay_driver.h"
#include "ipc/wire.h"

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
  fuzz::ReplayPlan plan;
  plan.rng_seed = 7;
  plan.mutations_per_seed = 2000;
  plan.max_flips = 4;
  plan.noise_inputs = 20000;
  plan.max_noise_bytes = 128;
  EXPECT_GT(fuzz::ReplayThroughTarget(Seeds(), plan), 40000);
}

}  // namespace
}  // namespace qr::ipc
