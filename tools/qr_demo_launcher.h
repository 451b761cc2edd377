// qr-demo's launcher: picks the backend (GPU when there are enough GPUs or
// sharing is allowed, else host), starts the world_size workers (fork+exec
// of `self` with WorkerArgs) and waits for them all. The workers' broker
// autostart finds the broker in the runfiles (ipc/broker_binary.h).
#ifndef QR_TOOLS_QR_DEMO_LAUNCHER_H_
#define QR_TOOLS_QR_DEMO_LAUNCHER_H_

#include <string>

#include "tools/qr_demo_flags.h"

namespace qr::demo {

// The process exit code: 0 every worker passed, 1 a worker failed, 2 the
// set-up failed (no socket path, too few GPUs for --device gpu, a spawn).
int Launch(const DemoFlags& f, const std::string& self);

}  // namespace qr::demo

#endif  // QR_TOOLS_QR_DEMO_LAUNCHER_H_
