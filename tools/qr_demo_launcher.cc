#include "tools/qr_demo_launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "comm/config.h"
#include "common/subprocess.h"
#include "ipc/broker_client.h"
#include "ipc/names.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/platform.h"

namespace qr::demo {
namespace {

// Waits for every worker; how many failed (each one said on stderr).
int WaitWorkers(const std::vector<pid_t>& pids) {
  int failed = 0;
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    while (::waitpid(pids[r], &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    ++failed;
    std::fputs(fmt::format("qr-demo: worker {} {} {}\n", r,
                           WIFEXITED(status) ? "exited with" : "killed by signal",
                           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status))
                   .c_str(),
               stderr);
  }
  return failed;
}

}  // namespace

int Launch(const DemoFlags& f, const std::string& self) {
  const std::string group = f.group.empty() ? fmt::format("qr-demo-{}", ::getpid()) : f.group;
  StatusOr<std::string> socket = ipc::ResolveSocketPath("");
  if (!socket.ok()) {
    std::fprintf(stderr, "qr-demo: %s\n", socket.status().ToString().c_str());
    return 2;
  }
  const bool running = ipc::BrokerConnection::Connect(*socket).ok();
  // fork+exec below: initialising the GPU runtime here is fine, the children
  // start afresh.
  const int gpus = f.device == "host" ? 0 : gpu::DeviceCount();
  // Fewer GPUs than workers: they share them only in the testing mode (the
  // workers' join reports a bad value).
  StatusOr<Config> config = LoadConfigFromEnv(gpus > 0 ? GpuPlatform() : Platform::kHost);
  const bool share = gpus > 0 && gpus < f.world_size && config.ok() && config->allow_shared_device;
  const bool enough = gpus >= f.world_size || share;
  std::string device = f.device;
  std::string why;
  if (share && device != "host") {
    why = fmt::format(
        " ({} ranks sharing {} GPU{}: QR_ALLOW_SHARED_DEVICE=1, a testing mode for "
        "NVIDIA MPS)",
        f.world_size, gpus, gpus == 1 ? "" : "s");
  }
  if (device == "auto") {
    device = enough ? "gpu" : "host";
    if (!enough) why = fmt::format(" ({} GPUs, {} needed)", gpus, f.world_size);
  } else if (device == "gpu" && !enough) {
    std::fprintf(stderr,
                 "qr-demo: --device gpu needs %d GPUs, found %d (fewer are shared only with "
                 "QR_ALLOW_SHARED_DEVICE=1, under NVIDIA MPS)\n",
                 f.world_size, gpus);
    return 2;
  }
  std::printf("qr-demo: %d workers on the %s backend%s, group %s, broker %s (%s)\n", f.world_size,
              device.c_str(), why.c_str(), group.c_str(), socket->c_str(),
              running ? "running" : "starting one");
  std::fflush(stdout);

  std::vector<pid_t> pids;
  for (int r = 0; r < f.world_size; ++r) {
    std::vector<std::string> args = WorkerArgs(f, device, group, r);
    args.insert(args.begin(), self);
    StatusOr<pid_t> pid = Spawn(args);
    if (!pid.ok()) {
      std::fprintf(stderr, "qr-demo: starting worker %d: %s\n", r, pid.status().ToString().c_str());
      for (pid_t p : pids) ::kill(p, SIGKILL);
      return 2;
    }
    pids.push_back(*pid);
  }
  if (const int failed = WaitWorkers(pids); failed > 0) {
    std::printf("qr-demo: FAILED (%d of %d workers)\n", failed, f.world_size);
    return 1;
  }
  std::printf("qr-demo: all checks passed\n");
  return 0;
}

}  // namespace qr::demo
