#include "tools/bench_nccl.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdio>

// Where NCCL's header is on the include path, the entry points this file
// binds at run time are checked against it at compile time, and the symmetric
// path's constants against NCCL_VERSION_CODE (the bench itself never needs
// the header: it dlopens the library, so the run-time version decides).
#if __has_include(<nccl.h>)
#include <nccl.h>
#define QR_BENCH_HAVE_NCCL_H 1
#endif

namespace qr::bench {

#ifdef QR_BENCH_HAVE_NCCL_H
static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId));
#if NCCL_VERSION_CODE >= 22700
static_assert(kNcclWinCollSymmetric == NCCL_WIN_COLL_SYMMETRIC);
static_assert(std::is_same_v<decltype(&ncclCommWindowRegister),
                             ncclResult_t (*)(ncclComm_t, void*, size_t, ncclWindow_t*, int)>);
#endif
#endif

bool Nccl::Load() {
  void* h = nullptr;
  for (const char* name : {"libnccl.so.2", "libnccl.so", "librccl.so.1", "librccl.so"}) {
    h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (h != nullptr) {
      library = name;
      break;
    }
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
  GetUniqueId = reinterpret_cast<decltype(GetUniqueId)>(dlsym(h, "ncclGetUniqueId"));
  CommInitRank = reinterpret_cast<decltype(CommInitRank)>(dlsym(h, "ncclCommInitRank"));
  MemAlloc = reinterpret_cast<decltype(MemAlloc)>(dlsym(h, "ncclMemAlloc"));
  MemFree = reinterpret_cast<decltype(MemFree)>(dlsym(h, "ncclMemFree"));
  CommWindowRegister =
      reinterpret_cast<decltype(CommWindowRegister)>(dlsym(h, "ncclCommWindowRegister"));
  CommWindowDeregister =
      reinterpret_cast<decltype(CommWindowDeregister)>(dlsym(h, "ncclCommWindowDeregister"));
  return CommInitAll && CommDestroy && AllReduce && GroupStart && GroupEnd && GetErrorString;
}

std::string NcclVersionName(int code) {
  if (code <= 0) return "unknown";
  // NCCL_VERSION: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
  if (code < 10000) return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
}

std::string NcclSymmetricSkipReason(int version_code, bool has_symbols) {
  // Codes below 10000 are the old encoding (<= 2.8): older than 2.27 too.
  if (version_code < kNcclSymmetricMinVersion) {
    return fmt::format("skipped: needs NCCL >= {} (this is {})",
                       NcclVersionName(kNcclSymmetricMinVersion), NcclVersionName(version_code));
  }
  if (!has_symbols) {
    return "skipped: the library has no ncclMemAlloc/ncclCommWindowRegister (NCCL >= 2.27 has)";
  }
  return "";
}

int Nccl::VersionCode() const {
  int v = 0;
  if (GetVersion == nullptr || GetVersion(&v) != 0) return 0;
  return v;
}

std::string Nccl::Version() const { return NcclVersionName(VersionCode()); }

Status NcclCheck(const Nccl& n, int result, const char* what) {
  if (result == 0) return OkStatus();
  return InternalError(fmt::format("{}: {}", what, n.GetErrorString(result)));
}

}  // namespace qr::bench
