// The broker's status document: the JSON that `qrctl status` reads
// (schema in docs/qrctl.md). Built from the registry's groups, their
// segments, and a scan of this uid's objects in /dev/shm; problems come with
// a remedy.
//
// A burst of STATUS requests (qrctl --watch from many terminals, a peer
// pipelining them) shares one document while nothing changed: it is rebuilt
// when the registry changed, when /dev/shm changed, or after kStatusCacheAge
// (so counters lag by at most that). The /dev/shm scan is repeated when the
// directory changed or after kStaleScanAge. Single-threaded.
#ifndef QR_IPC_BROKER_STATUS_DOC_H_
#define QR_IPC_BROKER_STATUS_DOC_H_

#include <time.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "ipc/broker/registry.h"
#include "ipc/gc.h"

namespace qr::broker {

// What the document says about the broker itself.
struct BrokerFacts {
  std::string socket_path;
  std::chrono::steady_clock::time_point started;
  size_t connections = 0;
  int max_connections = 0;
};

class StatusDocument {
 public:
  // The document for `registry` now, cached as described above. Valid until
  // the next call.
  const std::string& Get(const BrokerFacts& broker, const Registry& registry);

 private:
  std::string Build(const BrokerFacts& broker, const Registry& registry);
  const ipc::SweepResult& StaleObjects(const std::set<std::string>& ours);

  std::string doc_;
  uint64_t doc_version_ = ~uint64_t{0};
  std::chrono::steady_clock::time_point doc_time_{};
  ipc::SweepResult stale_;
  std::chrono::steady_clock::time_point stale_time_{};
  struct timespec shm_mtime_ {};  // of /dev/shm when it was last scanned
  bool stale_valid_ = false;
};

}  // namespace qr::broker

#endif  // QR_IPC_BROKER_STATUS_DOC_H_
