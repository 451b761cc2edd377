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

struct Nccl {
  using Comm = void*;
  int (*CommInitAll)(Comm*, int, const int*) = nullptr;
  int (*CommDestroy)(Comm) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  int (*GroupStart)() = nullptr;
  int (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
  int (*GetVersion)(int*) = nullptr;  // optional
  static constexpr int kFloat16 = 6, kBfloat16 = 9, kSum = 0;

  // Opens libnccl.so.2 (or librccl) and binds the entry points; false (and a
  // line on stderr) when the library or a required symbol is missing.
  bool Load();

  // "2.28.3" (NCCL >= 2.9 encodes major*10000 + minor*100 + patch), or
  // "unknown".
  std::string Version() const;
};

// Ok for ncclSuccess (0), else kInternal "what: NCCL's error string".
Status NcclCheck(const Nccl& n, int result, const char* what);

}  // namespace qr::bench

#endif  // QR_TOOLS_BENCH_NCCL_H_
