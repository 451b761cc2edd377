#include "common/status_macros.h"

#include <cstdio>
#include <cstdlib>

namespace qr::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "quickreduce: %s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace qr::internal
