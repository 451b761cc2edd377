// qr-demo: the main job. Starts `--world-size` independent worker processes
// (fork+exec of this binary), which join one group through the broker
// (started on demand), all-reduce in every regime and both dtypes over a few
// sizes, check every result (bit-identical to the host reference of the
// algorithm the policy chose, one-shot for small sizes and two-shot above,
// and within the proven bound of the exact sum) and time the calls. Rank 0
// prints a progress line and the table. Exit code 0 only if every check of
// every rank passed; 2 for bad flags.
//
//   ./bazelw run //:demo                      # 2 workers
//   ./bazelw run //:demo -- --world-size 4
//
// Flags: tools/qr_demo_flags.h; launcher: qr_demo_launcher.h; worker:
// qr_demo_worker.h; what rank 0 prints: qr_demo_report.h.
#include <cstdio>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/syscall.h"
#include "tools/qr_demo_flags.h"
#include "tools/qr_demo_launcher.h"
#include "tools/qr_demo_worker.h"

int main(int argc, char** argv) {
  const auto flags = qr::demo::ParseDemoArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::fprintf(stderr, "qr-demo: %s\nRun with --help for the flags.\n",
                 flags.status().message().c_str());
    return 2;
  }
  if (flags->help) {
    std::fputs(qr::demo::DemoUsage().c_str(), stdout);
    return 0;
  }
  qr::Status log = qr::InitLogging("qr-demo", "warn");
  if (!log.ok()) std::fprintf(stderr, "qr-demo: %s\n", log.ToString().c_str());
  if (flags->worker_rank >= 0) return qr::demo::Work(*flags);
  return qr::demo::Launch(*flags, qr::SelfExecutablePath());
}
