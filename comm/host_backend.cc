#include "comm/host_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "comm/bounded_wait.h"
#include "comm/fused_call.h"
#include "comm/host_backend_layout.h"
#include "comm/host_collectives.h"
#include "common/shm_object.h"
#include "common/status_macros.h"
#include "ipc/group_client.h"
#include "ipc/names.h"
#include "kernels/one_shot_reference.h"
#include "kernels/two_shot_reference.h"

namespace qr {
namespace {

namespace k = ::qr::kernels;

using host::FlagLine;
using host::IsOneShotSet;
using host::kConnectedSet;
using host::kOneShotSet;
using host::Layout;
using host::View;

// The codec stays in a one-shot call's description although one-shot ignores
// it: ranks naming different regimes disagree about the call all the same.
uint64_t DescribeCall(const k::TwoShotParams& p, Algorithm algorithm) {
  return static_cast<uint64_t>(p.num_elems) << 16 | static_cast<uint64_t>(algorithm) << 12 |
         static_cast<uint64_t>(p.codec) << 8 | static_cast<uint64_t>(p.dtype) << 1 |
         (p.cast_bf16_to_fp16 ? 1u : 0u);
}

std::string CallText(uint64_t tagged) {
  const Collective collective = CollectiveOf(tagged);
  const uint64_t desc = WithoutCollective(tagged);
  const std::string kind = collective == Collective::kReduceScatter ? "reduce_scatter with "
                           : collective == Collective::kAllGather   ? "all_gather with "
                                                                    : "all_reduce with ";
  const auto algorithm = static_cast<Algorithm>((desc >> 12) & 0xf);
  const auto codec = static_cast<Codec>((desc >> 8) & 0xf);
  const auto dtype = static_cast<DType>((desc >> 1) & 0x7f);
  return kind + std::to_string(desc >> 16) + " x " + DTypeName(dtype) + " " + CodecName(codec) +
         ((desc & 1) ? " (cast)" : "") + " " + AlgorithmName(algorithm);
}

class HostBackend final : public Backend, private HostExchange {
 public:
  HostBackend(int rank, int world_size, const HostBackendOptions& options)
      : rank_(rank),
        world_size_(world_size),
        options_(options),
        layout_(Layout::For(world_size, options.one_shot_ceiling_bytes)) {
    reduced_.resize(static_cast<size_t>(k::ShardElems(world_size)));
  }

  std::string device_id() const override { return std::string(ipc::kHostDeviceName); }
  // The largest layout's size, not the object's (host_backend_layout.h says
  // why); the object is Layout::object_bytes().
  uint64_t buffer_bytes() const override { return Layout::GeometryBytes(); }
  ipc::BlobKind blob_kind() const override { return ipc::BlobKind::kHostSegment; }

  std::array<uint8_t, 64> blob() const override {
    std::array<uint8_t, 64> b{};
    // Full name when it fits (NUL included), else the suffix, which peers
    // append to the group segment name they know too.
    const std::string& text = own_.name().size() < b.size() ? own_.name() : suffix_;
    std::memcpy(b.data(), text.data(), text.size());
    return b;
  }

  Status Allocate(const GroupControl& group) override {
    suffix_ = "host" + std::to_string(rank_);
    segment_prefix_ = group.segment_name() + "-";
    QR_ASSIGN_OR_RETURN(own_,
                        ShmMapping::Create(segment_prefix_ + suffix_, layout_.object_bytes()));
    auto* h = static_cast<host::BufferHeader*>(own_.data());
    h->magic = host::kMagic;
    h->version = host::kLayoutVersion;
    h->world_size = static_cast<uint32_t>(world_size_);
    h->num_slots = host::kSlots;
    h->one_shot_region_bytes = layout_.one_shot_region_bytes();
    return OkStatus();
  }

  Status Connect(const std::vector<PeerBuffer>& members, GroupControl& group) override {
    if (!own_.valid()) return InternalError("host backend: Connect before Allocate");
    if (members.size() != static_cast<size_t>(world_size_)) {
      return InternalError("host backend: " + std::to_string(members.size()) +
                           " members for world size " + std::to_string(world_size_));
    }
    group_ = &group;
    peers_.assign(static_cast<size_t>(world_size_), View{});
    for (const PeerBuffer& m : members) {
      if (m.rank < 0 || m.rank >= world_size_) return InternalError("member rank out of range");
      if (m.rank == rank_) {
        peers_[m.rank] = View{static_cast<uint8_t*>(own_.data()), layout_};
        continue;
      }
      if (m.kind != ipc::BlobKind::kHostSegment) {
        return InvalidArgumentError("rank " + std::to_string(m.rank) +
                                    " is not on the host backend (device " + m.device_id + ")");
      }
      const char* raw = reinterpret_cast<const char*>(m.blob.data());
      std::string text(raw, strnlen(raw, m.blob.size()));
      std::string name = !text.empty() && text[0] == '/' ? text : segment_prefix_ + text;
      // Only the buffer this rank must have made, in this group: a blob
      // naming any other object is not followed.
      if (name != segment_prefix_ + "host" + std::to_string(m.rank)) {
        return InvalidArgumentError("rank " + std::to_string(m.rank) + " published buffer name '" +
                                    name + "', not one of group " + segment_prefix_);
      }
      // Its ceiling is ours (checked before Connect), so is its size.
      StatusOr<ShmMapping> opened = ShmMapping::Open(name, layout_.object_bytes());
      if (!opened.ok()) {
        // A peer that died before we mapped it: report the group failure.
        Status g = group.Check();
        return g.ok() ? opened.status() : g;
      }
      ShmMapping peer = std::move(opened).value();
      View v{static_cast<uint8_t*>(peer.data()), layout_};
      const host::BufferHeader* h = v.header();
      if (h->magic != host::kMagic || h->version != host::kLayoutVersion ||
          h->world_size != static_cast<uint32_t>(world_size_) || h->num_slots != host::kSlots ||
          h->one_shot_region_bytes != layout_.one_shot_region_bytes()) {
        return InvalidArgumentError("rank " + std::to_string(m.rank) + "'s buffer " + name +
                                    " has another layout");
      }
      peers_[m.rank] = v;
      mapped_.push_back(std::move(peer));
    }
    // Barrier: once every peer has marked my buffer, all of them have mapped
    // it, so any rank may leave (and unlink its buffer) right after joining.
    Raise(kConnectedSet, 1, 0);
    return WaitAll(kConnectedSet, 1, 0, options_.join_timeout_ms);
  }

  Status AllReduce(const AllReduceCall& call) override {
    if (group_ == nullptr) return InternalError("host backend: AllReduce before Connect");
    if (call.collective == Collective::kAllReduceResidualRmsNorm) {
      // The all-reduce into norm_out, then the epilogue (docs/fused.md).
      AllReduceCall plain = call;
      plain.collective = Collective::kAllReduce;
      QR_RETURN_IF_ERROR(AllReduce(plain));
      ApplyHostResidualRmsNorm(call);
      return OkStatus();
    }
    k::TwoShotParams p;
    p.world_size = world_size_;
    p.codec = call.codec;
    p.dtype = call.dtype;
    p.cast_bf16_to_fp16 = call.cast_bf16_to_fp16;
    p.num_elems = static_cast<int64_t>(call.count);
    if (call.collective == Collective::kReduceScatter ||
        call.collective == Collective::kAllGather) {
      return RunHostCollective(*this, call,
                               WithCollective(DescribeCall(p, call.algorithm), call.collective),
                               host::kSlots);
    }
    const auto* in = static_cast<const uint16_t*>(call.in);
    auto* out = static_cast<uint16_t*>(call.out);
    if (call.algorithm == Algorithm::kOneShot) {
      QR_RETURN_IF_ERROR(k::ValidateOneShotParams(p));
      // The policy sends nothing larger (the ceiling is the layout's); the
      // shares hold no more.
      if (call.count * sizeof(uint16_t) > layout_.one_shot_share) {
        return InternalError("host backend: a one-shot call of " +
                             std::to_string(call.count * sizeof(uint16_t)) +
                             " bytes is above the group's one-shot ceiling (" +
                             std::to_string(layout_.one_shot_share) + " bytes)");
      }
      return RunOneShot(p, in, out);
    }
    QR_RETURN_IF_ERROR(k::ValidateTwoShotParams(p));
    return Run(p, in, out);
  }

  // Every failure is returned by the call that met it.
  Status Failure() const override { return OkStatus(); }

 private:
  // HostExchange: what reduce-scatter and all-gather rounds use
  // (comm/host_collectives.h), on the two-shot's slots, flags and rounds.
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  uint8_t* RecvSlot(int peer, int64_t slot, int phase, int source) const override {
    return peers_[peer].recv(slot, phase, source);
  }
  uint64_t NextRound() override { return ++round_; }
  Status Sync(int phase, uint64_t colour, uint64_t desc) override {
    Raise(phase, colour, desc);
    return WaitAll(phase, colour, desc, options_.op_timeout_ms);
  }

  Status Run(const k::TwoShotParams& p, const uint16_t* in, uint16_t* out) {
    const uint64_t desc = DescribeCall(p, Algorithm::kTwoShot);
    const int64_t tiles = k::NumTiles(p.num_elems);
    const int64_t seg_wire = k::ShardWireBytes(p.codec, world_size_);
    const View& me = peers_[rank_];
    for (int64_t t0 = 0; t0 < tiles; t0 += host::kSlots) {
      const int64_t batch = std::min<int64_t>(host::kSlots, tiles - t0);
      const uint64_t colour = ++round_;
      // Phase 1 (scatter): shard s of every tile goes to its owner, rank s.
      for (int64_t i = 0; i < batch; ++i) {
        for (int s = 0; s < world_size_; ++s) {
          k::EncodeInputShard(p, in, t0 + i, s, peers_[s].recv(i, 0, rank_));
        }
      }
      Raise(0, colour, desc);
      QR_RETURN_IF_ERROR(WaitAll(0, colour, desc, options_.op_timeout_ms));
      // Reduce my shards in source order, re-encode once into my own
      // phase-1 slot, copy that to every peer (same bytes everywhere).
      const uint8_t* received[kMaxWorldSize];
      for (int64_t i = 0; i < batch; ++i) {
        for (int s = 0; s < world_size_; ++s) received[s] = me.recv(i, 0, s);
        k::ReduceShard(p, received, reduced_.data());
        uint8_t* mine = me.recv(i, 1, rank_);
        k::EncodeReducedShard(p, reduced_.data(), mine);
        for (int s = 0; s < world_size_; ++s) {
          if (s != rank_) std::memcpy(peers_[s].recv(i, 1, rank_), mine, seg_wire);
        }
      }
      Raise(1, colour, desc);
      QR_RETURN_IF_ERROR(WaitAll(1, colour, desc, options_.op_timeout_ms));
      // Phase 2 (gather): every shard from its owner.
      for (int64_t i = 0; i < batch; ++i) {
        for (int s = 0; s < world_size_; ++s) {
          k::DecodeOutputShard(p, me.recv(i, 1, s), t0 + i, s, out);
        }
      }
    }
    return OkStatus();
  }

  // One-shot (kernels/one_shot_reference.h): my whole input, in wire form,
  // into slot [phase][rank_] of every rank's one-shot region (mine included),
  // one flag, one wait, then every rank sums the ws sources in rank order.
  //
  // Why two phases suffice: a rank raises its flag of a call only after it
  // has finished reading everything of its previous call, and no rank
  // finishes a call before every rank raised its flag of that call. So a
  // fast rank is at most one call ahead of the slowest: while rank B still
  // reads one-shot call c from phase c % 2, a peer may already write call
  // c + 1, but into phase (c + 1) % 2 (or into the two-shot slots); writing
  // phase c % 2 again means starting call c + 2, which needs B's flag of
  // call c + 1, which B raises only after it is done with call c. The same
  // argument keeps each flag line (colour and call description) of phase
  // c % 2 unchanged until every rank has read it.
  Status RunOneShot(const k::TwoShotParams& p, const uint16_t* in, uint16_t* out) {
    const uint64_t desc = DescribeCall(p, Algorithm::kOneShot);
    // Every rank makes the same sequence of calls, so the counter (and the
    // phase) agrees across ranks.
    const uint64_t colour = ++one_shot_calls_;
    const int phase = static_cast<int>(colour % 2);
    const View& me = peers_[rank_];
    uint16_t* mine = me.one_shot(phase, rank_);
    k::EncodeOneShot(p, in, p.num_elems, mine);
    const size_t bytes = static_cast<size_t>(p.num_elems) * sizeof(uint16_t);
    for (int s = 0; s < world_size_; ++s) {
      if (s != rank_) std::memcpy(peers_[s].one_shot(phase, rank_), mine, bytes);
    }
    Raise(kOneShotSet + phase, colour, desc);
    QR_RETURN_IF_ERROR(WaitAll(kOneShotSet + phase, colour, desc, options_.op_timeout_ms));
    const uint16_t* received[kMaxWorldSize];
    for (int s = 0; s < world_size_; ++s) received[s] = me.one_shot(phase, s);
    k::ReduceOneShot(p, received, p.num_elems, out);
    return OkStatus();
  }

  // The highest colour `src` has raised in the flag sets of the algorithm
  // that `set` does not belong to (acquire), for comparison with how far this
  // rank got in that algorithm.
  uint64_t OtherAlgorithmColour(int set, int src) const {
    const View& me = peers_[rank_];
    if (IsOneShotSet(set)) return me.flag(0, src).colour.load(std::memory_order_acquire);
    return std::max(me.flag(kOneShotSet, src).colour.load(std::memory_order_acquire),
                    me.flag(kOneShotSet + 1, src).colour.load(std::memory_order_acquire));
  }

  // Release: the data written above becomes visible to whoever acquires the
  // colour.
  void Raise(int phase, uint64_t colour, uint64_t desc) {
    for (int s = 0; s < world_size_; ++s) {
      FlagLine& f = peers_[s].flag(phase, rank_);
      f.call.store(desc, std::memory_order_relaxed);
      f.colour.store(colour, std::memory_order_release);
    }
  }

  // Each wait gets the whole QR_OP_TIMEOUT_MS: a long call that keeps making
  // progress never times out, a stalled peer does.
  Status WaitAll(int phase, uint64_t colour, uint64_t desc, int64_t timeout_ms) {
    const auto deadline = WaitClock::now() + std::chrono::milliseconds(timeout_ms);
    const View& me = peers_[rank_];
    const volatile uint32_t* abort_word = group_->abort_word();
    int next = 0;  // sources before `next` have arrived
    // Ranks whose policy disagrees (e.g. another QR_ONE_SHOT_MAX_KB) run the
    // other algorithm for this call. Such a source is ahead of this rank in
    // the other algorithm's flags without having raised ours; a source
    // legitimately one call ahead raised ours first (release), so reading the
    // other colour before ours (acquire) cannot mistake it for a stray.
    const bool data_wait = phase != kConnectedSet;
    const uint64_t my_other = IsOneShotSet(phase) ? round_ : one_shot_calls_;
    int strayed = -1;
    auto ready = [&] {
      while (next < world_size_) {
        const bool ahead = data_wait && OtherAlgorithmColour(phase, next) > my_other;
        if (me.flag(phase, next).colour.load(std::memory_order_acquire) < colour) {
          if (ahead) strayed = next;
          return ahead;
        }
        ++next;
      }
      return true;
    };
    auto aborted = [&] { return __atomic_load_n(abort_word, __ATOMIC_ACQUIRE) != 0; };
    std::string what = "peers to map this rank's buffer";
    if (IsOneShotSet(phase)) {
      what = "one-shot data of call " + std::to_string(colour);
    } else if (data_wait) {
      what = "phase " + std::to_string(phase + 1) + " data of round " + std::to_string(colour);
    }
    Status s = BoundedWait(ready, aborted, deadline, what);
    if (s.code() == StatusCode::kTimeout) {
      const std::string why =
          "rank " + std::to_string(rank_) + " " + s.message() + " from rank " +
          std::to_string(next) + " after " + std::to_string(timeout_ms) +
          (phase == kConnectedSet ? " ms (join timeout)" : " ms (QR_OP_TIMEOUT_MS)");
      group_->RaiseAbort(why).IgnoreError();
      return TimeoutError(why);
    }
    if (s.code() == StatusCode::kPeerFailed) {
      Status g = group_->Check();
      return g.ok() ? s : PeerFailedError(g.message());
    }
    QR_RETURN_IF_ERROR(s);
    if (strayed >= 0) {
      const Algorithm theirs = IsOneShotSet(phase) ? Algorithm::kTwoShot : Algorithm::kOneShot;
      const std::string why = "collective mismatch: rank " + std::to_string(strayed) + " ran " +
                              AlgorithmName(theirs) + " where rank " + std::to_string(rank_) +
                              " runs " + CallText(desc) +
                              " (do the ranks' QR_ONE_SHOT_MAX_KB differ?)";
      group_->RaiseAbort(why).IgnoreError();
      return PeerFailedError(why);
    }
    for (int src = 0; src < world_size_; ++src) {
      const uint64_t theirs = me.flag(phase, src).call.load(std::memory_order_relaxed);
      if (theirs != desc) {
        const std::string why = "collective mismatch: rank " + std::to_string(src) + " called " +
                                CallText(theirs) + ", rank " + std::to_string(rank_) + " called " +
                                CallText(desc);
        group_->RaiseAbort(why).IgnoreError();
        return PeerFailedError(why);
      }
    }
    return OkStatus();
  }

  const int rank_;
  const int world_size_;
  const HostBackendOptions options_;
  const Layout layout_;
  std::string suffix_;
  std::string segment_prefix_;
  ShmMapping own_;
  std::vector<ShmMapping> mapped_;
  std::vector<View> peers_;  // by rank; peers_[rank_] is own_
  GroupControl* group_ = nullptr;
  uint64_t round_ = 0;           // two-shot rounds so far (the colour of sets 0, 1)
  uint64_t one_shot_calls_ = 0;  // one-shot calls so far (the colour of its sets)
  std::vector<uint16_t> reduced_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateHostBackend(int rank, int world_size,
                                                     const HostBackendOptions& options) {
  QR_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  if (rank < 0 || rank >= world_size) {
    return InvalidArgumentError("rank " + std::to_string(rank) + " is outside [0, " +
                                std::to_string(world_size) + ")");
  }
  return std::unique_ptr<Backend>(new HostBackend(rank, world_size, options));
}

size_t HostSegmentBytes(int world_size, uint64_t one_shot_ceiling_bytes) {
  return Layout::For(world_size, one_shot_ceiling_bytes).object_bytes();
}

}  // namespace qr
