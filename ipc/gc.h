// Garbage collection of quickreduce's shared-memory objects and sockets.
//
// Objects of a uid live in /dev/shm as `quickreduce-<uid>-*`. A group segment
// (an object that starts with the segment magic) is live while anyone holds a
// lock on it (the broker's or a member's, whatever the layout version). A
// stale segment of this layout version is removed with its data objects,
// `<segment name>-*`; a segment of another layout version is reported in
// `unknown` and never removed (another quickreduce made it), nor are its data
// objects. An object gc cannot open (out of descriptors, say) might be a live
// segment: it is left alone, as is what might belong to it, and reported in
// errors. Objects of another owner are reported in `foreign`, never touched. A data
// object belongs to the longest existing segment name that prefixes it (so
// group "a" generation 1 never claims the objects of a group named "a-1-x").
// Data objects that belong to no segment are orphans and are removed too,
// once older than kOrphanMinAge (a member may be creating its group).
// Used by the broker (at start and when a group ends) and by `qrctl gc`.
#ifndef QR_IPC_GC_H_
#define QR_IPC_GC_H_

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace qr::ipc {

inline constexpr std::chrono::seconds kOrphanMinAge{10};

struct SweepResult {
  std::vector<std::string> removed;        // or, for a dry run, what would be removed
  std::vector<std::string> live_segments;  // group segments with a live owner
  // "<name> (layout version N, in use|not in use)": segments gc cannot parse.
  std::vector<std::string> unknown;
  std::vector<std::string> foreign;  // "<name> (uid N)": not ours, left alone
  std::vector<std::string> errors;   // objects that could not be examined or removed
};

// This uid's shm object names ("/quickreduce-<uid>-..."), sorted: only those
// owned by our euid with mode 0600 (common/shm_object.h).
std::vector<std::string> ListUserObjects(uint32_t uid);
// Objects under that prefix that fail the check: planted by another user (or
// changed since), ignored by the broker and gc, reported by qrctl status.
std::vector<std::string> ListForeignObjects(uint32_t uid);

// Sweeps this uid's objects as described above. Segments named in `keep` (the
// broker's own) and their data objects are never touched. Never fails: what
// could not be removed is listed in errors.
SweepResult SweepStale(uint32_t uid, bool dry_run, const std::set<std::string>& keep = {});

// Removes a group segment and every data object that belongs to it (see
// above). Errors name the objects that could not be removed.
[[nodiscard]] Status RemoveGroupObjects(std::string_view segment_name);

// Removes socket_path when no broker holds its lock (the broker that made it
// is dead). The lock file stays: brokers serialise on it. *removed says
// whether a socket was removed. OK when there is nothing to do.
[[nodiscard]] Status RemoveStaleSocket(const std::string& socket_path, bool* removed);

}  // namespace qr::ipc

#endif  // QR_IPC_GC_H_
