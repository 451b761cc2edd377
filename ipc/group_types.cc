#include "ipc/group_types.h"

namespace qr::ipc {

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "[" + s + "]";
}

std::string MissingRanksText(const std::vector<int>& absent, const std::vector<int>& unpublished) {
  return "ranks " + RankList(absent) + " never joined, ranks " + RankList(unpublished) +
         " joined but did not publish";
}

}  // namespace qr::ipc
