// What the broker, its clients and qrctl all say about a group's members: the
// kinds of blob a member publishes, the device name of host-backend members,
// the per-member counters and how messages list ranks. No classes: the daemon
// and qrctl include this without linking the client (ipc/group_client.h).
#ifndef QR_IPC_GROUP_TYPES_H_
#define QR_IPC_GROUP_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qr::ipc {

// What a member's 64-byte blob holds.
enum class BlobKind : uint32_t {
  kNone = 0,
  kGpuIpcHandle = 1,  // a GPU runtime IPC memory handle (64 raw bytes)
  kHostSegment = 2,   // a NUL-terminated shm object name (the host backend)
};

inline constexpr size_t kBlobBytes = 64;
// device_id of host-backend members: exempt from the same-device check.
inline constexpr std::string_view kHostDeviceName = "host";
// What is counted per member for qrctl: two-shot calls per codec, indexed by
// qr_regime (FP, INT8, INT6, INT4, INT3), then one-shot calls (exact values
// whatever the regime).
inline constexpr int kNumCounters = 6;
inline constexpr int kOneShotCounter = 5;
// Their names, as qrctl and the broker's status document spell them.
inline constexpr const char* kCounterNames[kNumCounters] = {"FP",   "INT8", "INT6",
                                                            "INT4", "INT3", "one-shot"};

// "[0, 3]": ranks as messages list them.
std::string RankList(const std::vector<int>& ranks);
// What a join timeout says, from the broker and from a client alike: "ranks
// [..] never joined, ranks [..] joined but did not publish".
std::string MissingRanksText(const std::vector<int>& absent, const std::vector<int>& unpublished);

}  // namespace qr::ipc

#endif  // QR_IPC_GROUP_TYPES_H_
