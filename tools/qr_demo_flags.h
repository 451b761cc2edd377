// qr-demo's command line (CLI11), for the launcher and the workers it
// starts: the launcher parses what the user typed, and passes each worker
// the same flags plus --worker-rank through WorkerArgs, which the worker
// parses back with ParseDemoArgs. Pure: no process or GPU is touched.
//
//   QR_ASSIGN_OR_RETURN(DemoFlags f, ParseDemoArgs({"--world-size", "4"}));
#ifndef QR_TOOLS_QR_DEMO_FLAGS_H_
#define QR_TOOLS_QR_DEMO_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/types.h"

namespace qr::demo {

struct DemoFlags {
  int world_size = 2;
  std::string device = "auto";  // auto | host | gpu
  // The last size is above the world-size-2 one-shot ceiling (4 MiB), so every
  // regime also runs two-shot with its codec.
  std::vector<uint64_t> sizes = {16, 48 * 1024 + 16, 1 << 20, 8 << 20};
  std::vector<Codec> regimes;  // empty: every codec the world size allows
  std::vector<DType> dtypes = {DType::kFloat16, DType::kBFloat16};
  std::string group;     // empty: the launcher picks qr-demo-<pid>
  int worker_rank = -1;  // internal: >= 0 in a worker process
  bool help = false;     // --help: print DemoUsage() and exit 0
};

// Parses argv[1..]: "--flag value" or "--flag=value", lists comma-separated,
// sizes in bytes with an optional K/M/G. kInvalidArgument naming the flag for
// an unknown flag, a missing value, a world size not 2/4/8, a device not
// auto/host/gpu, a size not a positive multiple of 16, an unknown or empty
// list item ("--regimes FP," included).
[[nodiscard]] StatusOr<DemoFlags> ParseDemoArgs(const std::vector<std::string>& args);

// The --help text.
std::string DemoUsage();

// argv[1..] of worker `rank`: f's lists, and the device and group the
// launcher settled on. ParseDemoArgs reads them back into f's values.
std::vector<std::string> WorkerArgs(const DemoFlags& f, const std::string& device,
                                    const std::string& group, int rank);

}  // namespace qr::demo

#endif  // QR_TOOLS_QR_DEMO_FLAGS_H_
