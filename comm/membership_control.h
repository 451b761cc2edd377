// The broker membership (ipc/group_client.h) as a backend sees a group
// (comm/backend.h's GroupControl), and its READY slots as Connect() takes
// them. The communicator uses these; so do tests that drive a backend
// through a real broker without a communicator.
//
//   MembershipControl control(*membership);
//   QR_RETURN_IF_ERROR(backend->Allocate(control));
//   ...
//   QR_RETURN_IF_ERROR(backend->Connect(PeerBuffersOf(membership->Members()), control));
#ifndef QR_COMM_MEMBERSHIP_CONTROL_H_
#define QR_COMM_MEMBERSHIP_CONTROL_H_

#include <string>
#include <string_view>
#include <vector>

#include "comm/backend.h"
#include "common/status.h"
#include "ipc/group_client.h"

namespace qr {

// Forwards to `membership`, which must outlive it. Thread-compatible, like
// the membership (abort_word() may be read from anywhere).
class MembershipControl final : public GroupControl {
 public:
  explicit MembershipControl(ipc::GroupMembership& membership) : m_(membership) {}
  const std::string& segment_name() const override { return m_.segment_name(); }
  const volatile uint32_t* abort_word() const override { return m_.abort_word(); }
  void* abort_page() const override { return m_.abort_page(); }
  Status Check() override { return m_.Check(); }
  Status RaiseAbort(std::string_view reason) override { return m_.RaiseAbort(reason); }

 private:
  ipc::GroupMembership& m_;
};

// What Connect() needs of each member's slot, in the same (rank) order.
inline std::vector<PeerBuffer> PeerBuffersOf(const std::vector<ipc::MemberInfo>& members) {
  std::vector<PeerBuffer> out;
  out.reserve(members.size());
  for (const ipc::MemberInfo& m : members) {
    PeerBuffer p;
    p.rank = m.rank;
    p.device_id = m.device_id;
    p.kind = m.kind;
    p.blob = m.blob;
    p.buffer_bytes = m.buffer_bytes;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace qr

#endif  // QR_COMM_MEMBERSHIP_CONTROL_H_
