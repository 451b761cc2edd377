#include "tools/bench_nccl.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdio>

namespace qr::bench {

bool Nccl::Load() {
  void* h = nullptr;
  for (const char* name : {"libnccl.so.2", "libnccl.so", "librccl.so.1", "librccl.so"}) {
    h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (h != nullptr) break;
  }
  if (h == nullptr) {
    std::fprintf(stderr, "qr-bench: NCCL/RCCL not found (%s); no baseline\n", dlerror());
    return false;
  }
  CommInitAll = reinterpret_cast<decltype(CommInitAll)>(dlsym(h, "ncclCommInitAll"));
  CommDestroy = reinterpret_cast<decltype(CommDestroy)>(dlsym(h, "ncclCommDestroy"));
  AllReduce = reinterpret_cast<decltype(AllReduce)>(dlsym(h, "ncclAllReduce"));
  GroupStart = reinterpret_cast<decltype(GroupStart)>(dlsym(h, "ncclGroupStart"));
  GroupEnd = reinterpret_cast<decltype(GroupEnd)>(dlsym(h, "ncclGroupEnd"));
  GetErrorString = reinterpret_cast<decltype(GetErrorString)>(dlsym(h, "ncclGetErrorString"));
  GetVersion = reinterpret_cast<decltype(GetVersion)>(dlsym(h, "ncclGetVersion"));
  return CommInitAll && CommDestroy && AllReduce && GroupStart && GroupEnd && GetErrorString;
}

std::string Nccl::Version() const {
  int v = 0;
  if (GetVersion == nullptr || GetVersion(&v) != 0) return "unknown";
  return fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
}

Status NcclCheck(const Nccl& n, int result, const char* what) {
  if (result == 0) return OkStatus();
  return InternalError(fmt::format("{}: {}", what, n.GetErrorString(result)));
}

}  // namespace qr::bench
