// qr-bench's NCCL (or RCCL) baseline, loaded with dlopen so that the binary
// builds and runs without it: the handful of entry points the bench calls.
//
//   Nccl nccl;
//   if (nccl.Load()) QR_RETURN_IF_ERROR(NcclCheck(nccl, nccl.GroupStart(), "ncclGroupStart"));
#ifndef QR_TOOLS_BENCH_NCCL_H_
#define QR_TOOLS_BENCH_NCCL_H_

#include <cstddef>
#include <string>

#include "common/status.h"

namespace qr::bench {

// NCCL's version code of 2.27.0, the first with symmetric kernels
// (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC; NCCL 2.27 release
// notes). NCCL_VERSION(X, Y, Z) is X*10000 + Y*100 + Z from 2.9 on, X*1000 +
// Y*100 + Z before (NVIDIA/nccl src/nccl.h.in).
inline constexpr int kNcclSymmetricMinVersion = 22700;
// NCCL_WIN_COLL_SYMMETRIC (NVIDIA/nccl src/nccl.h.in at
// 021e8045ff77a8a9fba909617a0129d3c3d44def: "users need to guarantee the
// offset to the buffer head address from all ranks must be equal when calling
// NCCL collective operations": NCCL API docs, "Window Registration Flags",
// docs.nvidia.com/deeplearning/nccl/archives/nccl_2275/user-guide/docs/api/flags.html).
// The calls (same header): ncclMemAlloc(void** ptr, size_t size);
// ncclCommWindowRegister(ncclComm_t, void* buff, size_t size, ncclWindow_t*
// win, int winFlags); ncclCommWindowDeregister(ncclComm_t, ncclWindow_t).
inline constexpr int kNcclWinCollSymmetric = 0x01;
// ncclUniqueId is 128 bytes (NCCL_UNIQUE_ID_BYTES).
inline constexpr size_t kNcclUniqueIdBytes = 128;

// "2.28.3" from a version code (either encoding above); "unknown" for <= 0.
std::string NcclVersionName(int code);

// Whether the symmetric baseline can run: empty when it can, else the
// reason it is skipped, "skipped: needs NCCL >= 2.27 (this is 2.21.5)" or
// "skipped: <library> has no ncclCommWindowRegister/ncclMemAlloc". Pure: the
// runtime version code (ncclGetVersion; <= 0 unknown) and whether the
// library has the entry points.
std::string NcclSymmetricSkipReason(int version_code, bool has_symbols);

// ncclUniqueId's layout (passed by value to ncclCommInitRank: the same type
// here keeps the call's ABI).
struct NcclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

struct Nccl {
  using Comm = void*;
  using Window = void*;
  int (*CommInitAll)(Comm*, int, const int*) = nullptr;
  int (*CommDestroy)(Comm) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  int (*GroupStart)() = nullptr;
  int (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
  int (*GetVersion)(int*) = nullptr;  // optional
  // One process per GPU (optional: --launch per-gpu needs them).
  int (*GetUniqueId)(NcclUniqueId* id) = nullptr;
  int (*CommInitRank)(Comm*, int nranks, NcclUniqueId id, int rank) = nullptr;
  // Symmetric kernels (optional, NCCL >= 2.27).
  int (*MemAlloc)(void** ptr, size_t size) = nullptr;
  int (*MemFree)(void* ptr) = nullptr;
  int (*CommWindowRegister)(Comm, void* buff, size_t size, Window* win, int flags) = nullptr;
  int (*CommWindowDeregister)(Comm, Window win) = nullptr;
  static constexpr int kFloat16 = 6, kBfloat16 = 9, kSum = 0;

  // Opens libnccl.so.2 (or librccl) and binds the entry points; false (and a
  // line on stderr) when the library or a required symbol is missing.
  bool Load();

  // "2.28.3", or "unknown".
  std::string Version() const;
  // ncclGetVersion's code, 0 when unknown.
  int VersionCode() const;
  // The library's name as dlopen found it ("libnccl.so.2").
  std::string library;
};

// Ok for ncclSuccess (0), else kInternal "what: NCCL's error string".
Status NcclCheck(const Nccl& n, int result, const char* what);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_NCCL_H_
