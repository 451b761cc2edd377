// qr-bench --launch per-gpu's side channel between the launcher and its
// workers: a Unix socket the launcher listens on (in a private temporary
// directory) and one connection per worker. Its one primitive is an
// all-gather of short text lines: every rank sends a line, and once all
// have, every rank gets all of them in rank order. The workers build on it
// the barrier before each timed batch, rank 0's repetition count, the slowest
// rank's time, every rank's "ok" before a collective, and NCCL's unique id
// (rank 0 makes it, the others receive it: no file, no broker change).
//
// A rank that leaves (its connection closes, e.g. it died) while others
// wait makes the server close every connection, so the waiting ranks'
// AllGather fails at once instead of hanging; the launcher also stops the
// workers at its timeout (tools/bench_launch.h).
//
//   launcher: QR_ASSIGN_OR_RETURN(CoordServer s, CoordServer::Listen(path, ws));
//             while (!s.done()) QR_RETURN_IF_ERROR(s.Poll(100));
//   worker:   QR_ASSIGN_OR_RETURN(CoordClient c, CoordClient::Connect(path, rank));
//             QR_ASSIGN_OR_RETURN(std::vector<std::string> all, c.AllGather("12.5"));
#ifndef QR_TOOLS_BENCH_COORD_H_
#define QR_TOOLS_BENCH_COORD_H_

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace qr::bench {

// The separator of the gathered lines on the wire; a payload holds neither
// it nor a newline.
inline constexpr char kCoordSeparator = '\x1f';

// Ok, or kInvalidArgument when `payload` holds a newline or kCoordSeparator.
[[nodiscard]] Status CheckCoordPayload(const std::string& payload);

// "ab\x01" <-> "616201": binary values (NCCL's id) as payloads.
std::string HexEncode(const std::string& bytes);
[[nodiscard]] StatusOr<std::string> HexDecode(const std::string& hex);

class CoordServer {
 public:
  // Binds and listens on `path` (which must not exist) for world_size ranks.
  [[nodiscard]] static StatusOr<CoordServer> Listen(const std::string& path, int world_size);

  // Accepts, reads and answers complete rounds for up to timeout_ms.
  // kInternal for a socket error; a rank that left while another waited is
  // no error here: every connection is closed (aborted() then says why).
  [[nodiscard]] Status Poll(int timeout_ms);

  // Closes every connection: the workers' next AllGather fails.
  void Abort(const std::string& why);

  // Every rank connected and has closed its connection with no round open.
  bool done() const;
  bool aborted() const { return !abort_reason_.empty(); }
  const std::string& abort_reason() const { return abort_reason_; }
  int rounds() const { return rounds_; }

 private:
  struct Peer {
    UniqueFd fd;
    int rank = -1;                  // -1 until its hello line
    std::string in;                 // bytes read, not yet a whole line
    std::deque<std::string> lines;  // whole lines not yet gathered
    bool closed = false;
  };
  CoordServer(UniqueFd listener, int world_size)
      : listener_(std::move(listener)), ws_(world_size) {}
  Status Accept();
  Status Read(Peer& p);
  void Answer();

  UniqueFd listener_;
  int ws_;
  std::vector<Peer> peers_;
  std::string abort_reason_;
  int rounds_ = 0;
};

class CoordClient {
 public:
  // Connects to the server at `path` as `rank`, retrying until `timeout`.
  [[nodiscard]] static StatusOr<CoordClient> Connect(
      const std::string& path, int rank,
      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Sends `payload` and waits for every rank's (payload[r] at index r).
  // kInvalidArgument for a bad payload; kUnavailable when the launcher closed
  // the connection (a rank left, or the launcher stopped).
  [[nodiscard]] StatusOr<std::vector<std::string>> AllGather(const std::string& payload);
  [[nodiscard]] Status Barrier();
  // Rank 0's payload on every rank (the others' payloads are ignored).
  [[nodiscard]] StatusOr<std::string> Broadcast(const std::string& payload);
  // Ok on every rank when every rank's `mine` is ok; else the same
  // kInternal on every rank naming the first rank that failed and why.
  [[nodiscard]] Status AllOk(const Status& mine);

  int rank() const { return rank_; }

 private:
  CoordClient(UniqueFd fd, int rank) : fd_(std::move(fd)), rank_(rank) {}
  UniqueFd fd_;
  int rank_;
  std::string in_;
};

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_COORD_H_
