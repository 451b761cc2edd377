// A host model of the flag family's slot-row protocol across calls of every
// kind (kernels/gpu/collective_kernels.cuh, "Slot-row reuse"): one block per
// rank, each kernel as the ordered list of its sends, flag raises, waits and
// slot reads per tile, exactly as two_shot.cu (all-reduce), reduce_scatter.cu
// and all_gather.cu order them (FP: no overlap; the integer codecs: the next
// tile's data out early). Random interleavings of the ranks (any rank whose
// next step can run, runs it) over random sequences of calls must never let a
// send overwrite a slot its owner has not read yet, nor a read find anything
// but the tile it waited for, nor deadlock. A reduce-scatter that raised its
// next flag before its reduce (no guard) is caught, so the check can fail.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace qr::kernels {
namespace {

enum class Kind { kAllReduce, kReduceScatter, kAllGather };
enum class Op { kSend, kRaise, kWait, kRead };

struct Step {
  Op op;
  int phase;  // 0: data1/flags1, 1: data2/flags2
  uint32_t colour;
};

struct Call {
  Kind kind;
  bool overlap;  // an integer codec (C::kOverlapNextTile); FP: false
  int tiles;
};

// The steps of one call of one block starting at colour `first`, in the
// kernels' order. `guarded`: the reduce-scatter raises the next tile's flag
// after this tile's reduce (the kernels); false models the unguarded order.
std::vector<Step> Steps(const Call& call, uint32_t first, bool guarded) {
  std::vector<Step> s;
  auto add = [&](Op op, int phase, uint32_t c) { s.push_back({op, phase, c}); };
  const uint32_t last = first + static_cast<uint32_t>(call.tiles) - 1;
  switch (call.kind) {
    case Kind::kAllReduce:
      add(Op::kSend, 0, first);
      add(Op::kRaise, 0, first);
      for (uint32_t c = first; c <= last; ++c) {
        const bool more = c < last;
        add(Op::kWait, 0, c);
        add(Op::kRead, 0, c);
        add(Op::kSend, 1, c);
        if (call.overlap && more) {
          add(Op::kSend, 0, c + 1);
          add(Op::kRaise, 1, c);  // SignalAllTwice: both flags under one fence
          add(Op::kRaise, 0, c + 1);
        } else {
          add(Op::kRaise, 1, c);
        }
        add(Op::kWait, 1, c);
        add(Op::kRead, 1, c);
        if (!call.overlap && more) {
          add(Op::kSend, 0, c + 1);
          add(Op::kRaise, 0, c + 1);
        }
      }
      break;
    case Kind::kReduceScatter:
      add(Op::kSend, 0, first);
      add(Op::kRaise, 0, first);
      for (uint32_t c = first; c <= last; ++c) {
        const bool more = c < last;
        add(Op::kWait, 0, c);
        if (call.overlap && more) add(Op::kSend, 0, c + 1);
        if (!guarded && more) {
          if (!call.overlap) add(Op::kSend, 0, c + 1);
          add(Op::kRaise, 0, c + 1);
        }
        add(Op::kRead, 0, c);
        if (guarded && more) {
          if (!call.overlap) add(Op::kSend, 0, c + 1);
          add(Op::kRaise, 0, c + 1);
        }
      }
      break;
    case Kind::kAllGather:
      add(Op::kSend, 1, first);
      add(Op::kRaise, 1, first);
      for (uint32_t c = first; c <= last; ++c) {
        const bool more = c < last;
        add(Op::kWait, 1, c);
        if (call.overlap && more) add(Op::kSend, 1, c + 1);
        add(Op::kRead, 1, c);
        if (more) {
          if (!call.overlap) add(Op::kSend, 1, c + 1);
          add(Op::kRaise, 1, c + 1);
        }
      }
      break;
  }
  return s;
}

constexpr int kMaxWs = 4;

// Slot (phase, row, source) of a receiver: the colour last written, and
// whether the receiver has read it.
struct Slot {
  uint32_t colour = 0;
  bool written = false;
  bool read = true;
};

struct World {
  int ws;
  std::array<std::array<std::array<std::array<Slot, kMaxWs>, 2>, 2>, kMaxWs> slot{};
  std::array<std::array<std::array<std::array<uint32_t, kMaxWs>, 2>, 2>, kMaxWs> flag{};
};

// Runs `calls` on `ws` ranks under one random schedule; "" or what went
// wrong.
std::string RunSchedule(int ws, const std::vector<Call>& calls, bool guarded, uint64_t seed) {
  std::vector<std::vector<Step>> program(ws);
  for (int r = 0; r < ws; ++r) {
    uint32_t colour = 1;  // colours run on across calls
    for (const Call& call : calls) {
      const std::vector<Step> s = Steps(call, colour, guarded);
      program[r].insert(program[r].end(), s.begin(), s.end());
      colour += static_cast<uint32_t>(call.tiles);
    }
  }
  World w{ws, {}, {}};
  std::vector<size_t> pc(ws, 0);
  std::mt19937_64 rng(seed);
  for (;;) {
    std::vector<int> ready;
    bool done = true;
    for (int r = 0; r < ws; ++r) {
      if (pc[r] == program[r].size()) continue;
      done = false;
      const Step& st = program[r][pc[r]];
      bool can = true;
      if (st.op == Op::kWait) {
        for (int s = 0; s < ws; ++s)
          can = can && w.flag[r][st.phase][st.colour & 1][s] == st.colour;
      }
      if (can) ready.push_back(r);
    }
    if (done) return "";
    if (ready.empty()) return "deadlock";
    const int r = ready[rng() % ready.size()];
    const Step& st = program[r][pc[r]++];
    const int row = static_cast<int>(st.colour & 1);
    const std::string at = "rank " + std::to_string(r) + " phase " + std::to_string(st.phase) +
                           " colour " + std::to_string(st.colour);
    switch (st.op) {
      case Op::kSend:
        for (int d = 0; d < ws; ++d) {
          if (d == r) continue;  // a rank's own shard stays in registers
          Slot& slot = w.slot[d][st.phase][row][r];
          if (!slot.read) {
            return at + ": overwrote colour " + std::to_string(slot.colour) + " at rank " +
                   std::to_string(d) + " before it was read";
          }
          slot = {st.colour, true, false};
        }
        break;
      case Op::kRaise:
        for (int d = 0; d < ws; ++d) w.flag[d][st.phase][row][r] = st.colour;
        break;
      case Op::kWait:
        break;
      case Op::kRead:
        for (int s = 0; s < ws; ++s) {
          if (s == r) continue;
          Slot& slot = w.slot[r][st.phase][row][s];
          if (!slot.written || slot.colour != st.colour || slot.read) {
            return at + ": read colour " + std::to_string(slot.colour) + " from rank " +
                   std::to_string(s);
          }
          slot.read = true;
        }
        break;
    }
  }
}

std::vector<Call> RandomCalls(std::mt19937_64& rng, int n) {
  std::vector<Call> calls;
  for (int i = 0; i < n; ++i) {
    calls.push_back(
        {static_cast<Kind>(rng() % 3), rng() % 2 == 0, 1 + static_cast<int>(rng() % 3)});
  }
  return calls;
}

TEST(SlotRowsModelTest, EverySequenceOfKindsIsSafeUnderRandomSchedules) {
  std::mt19937_64 rng(29);
  for (int ws : {2, 3, 4}) {
    for (int trial = 0; trial < 400; ++trial) {
      const std::vector<Call> calls = RandomCalls(rng, 6);
      for (uint64_t seed = 0; seed < 8; ++seed) {
        const std::string e = RunSchedule(ws, calls, /*guarded=*/true, rng());
        ASSERT_EQ(e, "") << "ws " << ws << " trial " << trial << " seed " << seed;
      }
    }
  }
}

// Without the guard (the next flag before this tile's reduce), a peer may
// overwrite the row being reduced: some schedule shows it.
TEST(SlotRowsModelTest, AReduceScatterWithoutTheGuardIsCaught) {
  const std::vector<Call> calls = {{Kind::kReduceScatter, false, 3}};
  int caught = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    if (!RunSchedule(2, calls, /*guarded=*/false, seed).empty()) ++caught;
  }
  EXPECT_GT(caught, 0);
}

}  // namespace
}  // namespace qr::kernels
