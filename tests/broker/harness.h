// Helpers for multi-process broker tests: a short temp dir for sockets, a
// pipe to report from forked children, host-backend joins, raw connections
// and qrctl in-process. Children (forked members, the qr-broker) and unique
// group names are tests/util/process.h's.
#ifndef QR_TESTS_BROKER_HARNESS_H_
#define QR_TESTS_BROKER_HARNESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "ipc/group_client.h"
#include "ipc/segment.h"
#include "tests/util/process.h"  // BrokerProcess, ForkChild, UniqueGroup

namespace qr::testing {

// A fresh directory for sockets. $TEST_TMPDIR is often too long for
// sun_path, so this is /tmp/qrb-XXXXXX; removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A pipe for fixed-size records from children to the parent.
class Pipe {
 public:
  Pipe();
  ~Pipe();
  void Write(const void* data, size_t n);  // child side
  // Reads exactly n bytes within timeout; false on EOF/timeout.
  bool Read(void* data, size_t n, std::chrono::milliseconds timeout);
  void CloseWrite();

 private:
  int fds_[2];
};

ipc::JoinParams HostJoin(const std::string& socket, const std::string& group, int rank,
                         int world_size);
std::array<uint8_t, ipc::kBlobBytes> BlobFor(int rank);
// Publishes ranks 0 and 1 of a joined two-rank host group at once (each waits
// for the other to reach READY); the first error, or OK when both are READY.
Status PublishBoth(ipc::GroupMembership& m0, ipc::GroupMembership& m1);

// Names of this uid's shm objects whose name starts with `prefix`.
std::vector<std::string> ShmObjectsWithPrefix(const std::string& prefix);
int CountOpenFds(pid_t pid);
// CPU time (user + system) process `pid` has used so far, or -1 us. Unlike
// wall time it does not grow when a loaded machine deschedules the process.
std::chrono::microseconds CpuTimeOf(pid_t pid);
// A plain connected socket to the broker (for raw bytes), or -1.
int ConnectRaw(const std::string& socket);
// Reads fd until EOF or timeout; returns what arrived, *eof says which.
std::vector<uint8_t> ReadUntilEof(int fd, std::chrono::milliseconds timeout, bool* eof = nullptr);
// `bytes` bytes of back-to-back STATUS frames (a pipelining peer).
std::vector<uint8_t> StatusBurst(size_t bytes);
// Forms a two-rank host group (both ranks joined and READY) and leaves it;
// returns how long Join to READY took, or the first error.
StatusOr<std::chrono::microseconds> TimeFormation(const std::string& socket,
                                                  const std::string& group,
                                                  std::chrono::milliseconds timeout);
// Parameters of generation 1 of a two-rank `group` of a broker serving
// `other_socket` (so no broker under test adopts it).
ipc::GroupSegment::CreateParams OtherBrokerSegment(const std::string& group,
                                                   const std::string& other_socket);
// `count` live group segments of a broker serving `other_socket` (this
// process holds their locks): what a busy host's /dev/shm holds.
std::vector<std::unique_ptr<ipc::GroupSegment>> LiveForeignSegments(
    int count, const std::string& other_socket);

// qrctl run in-process (tools::RunQrctl) with `args` after the program name.
struct CtlRun {
  int code;
  std::string out;
  std::string err;
};
CtlRun Qrctl(std::vector<std::string> args);

// Gives this process (and the children it starts later) a /dev/shm of its
// own: a private mount namespace with a fresh tmpfs of `bytes` there. For
// tests that plant hostile objects, which every other broker of this uid
// would otherwise see. Needs root; returns why it could not (empty: done).
// Once per process; later calls return the first call's result.
std::string EnterPrivateShm(size_t bytes = 64 << 20);

// Waits until pred() is true or timeout; returns pred().
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

}  // namespace qr::testing

#endif  // QR_TESTS_BROKER_HARNESS_H_
