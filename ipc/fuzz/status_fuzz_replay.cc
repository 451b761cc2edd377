// Runs the status fuzz target's checks without libFuzzer (replay_driver.h):
// status documents of every shape, with hostile strings and wrong types,
// their mutations, non-ASCII text and random bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ipc/fuzz/replay_driver.h"

namespace qr {
namespace {

std::vector<std::string> Seeds() {
  return {
      R"({"schema_version":1,"broker":{"pid":7,"uid":0,"uptime_s":12.5,"socket":"/s",)"
      R"("version":"0.1.0","protocol_version":1},"groups":[{"name":"g","generation":3,)"
      R"("world_size":2,"state":"FAILED","segment":"/quickreduce-0-g-3","buffer_bytes":1048576,)"
      R"("adopted":false,"age_s":1.0,"abort_word":1,"failure_reason":"rank 1 died",)"
      R"("members":[{"rank":0,"pid":9,"alive":true,"published":true,"device":"host",)"
      R"("ops":{"FP":3},"bytes":{"FP":4096},"last_progress_s":0.5}],"missing_ranks":[1]}],)"
      R"("stale_objects":["/quickreduce-0-x"],"problems":[{"severity":"error","group":"g",)"
      R"("message":"m","remedy":"r"}]})",
      R"({"broker":{"pid":"x","uptime_s":1e308},"groups":[{"name":5,"age_s":-1,)"
      R"("generation":-7,"members":[{"rank":1e300,"ops":[],"last_progress_s":"n"}],)"
      R"("missing_ranks":[1.5,"a",null]},3],"problems":[1,{"message":{"a":1}}]})",
      "{\"broker\":{\"socket\":\"\\u001b[2J\\n\\nstatus: healthy\\u009b\\u202e\"},"
      "\"problems\":[{\"message\":\"\\r\\u0000\"}]}",
      "[1,2,3]",
      "null",
      "\"\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80\"",
      "\xff\xfe\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80",
      "plain text with a \x1b[31m colour",
  };
}

TEST(StatusFuzzReplayTest, DocumentsTextAndNoise) {
  std::vector<std::vector<uint8_t>> seeds;
  for (const std::string& seed : Seeds()) seeds.emplace_back(seed.begin(), seed.end());
  fuzz::ReplayPlan plan;
  plan.rng_seed = 11;
  plan.cut_step = 3;
  plan.mutations_per_seed = 300;
  plan.max_flips = 3;
  plan.noise_inputs = 2000;
  plan.max_noise_bytes = 96;
  plan.high_bit_noise = true;
  EXPECT_GT(fuzz::ReplayThroughTarget(seeds, plan), 4000);
}

}  // namespace
}  // namespace qr
