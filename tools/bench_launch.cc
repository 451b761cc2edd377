#include "tools/bench_launch.h"

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <utility>

#include "common/status_macros.h"
#include "common/subprocess.h"
#include "tools/bench_report.h"
#include "tools/bench_torch.h"

namespace qr::bench {

int CombineWorkerExits(const std::vector<int>& codes) {
  if (codes.empty()) return 1;
  bool some_failed = false;
  for (int c : codes) {
    if (c == 0) continue;
    if (c == 3) {
      some_failed = true;
      continue;
    }
    return c == 2 ? 2 : 1;
  }
  return some_failed ? 3 : 0;
}

StatusOr<WorkerGroupResult> RunWorkerGroup(const std::vector<std::vector<std::string>>& argvs,
                                           CoordServer& server, std::chrono::milliseconds timeout,
                                           std::chrono::milliseconds grace) {
  const int n = static_cast<int>(argvs.size());
  std::vector<pid_t> pids;
  for (const auto& argv : argvs) {
    StatusOr<pid_t> pid = Spawn(argv);
    if (!pid.ok()) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) (void)WaitExit(p, std::chrono::seconds(10));
      return pid.status();
    }
    pids.push_back(*pid);
  }
  WorkerGroupResult result;
  result.exit_codes.assign(n, -1);
  const auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  int running = n;
  while (running > 0) {
    QR_RETURN_IF_ERROR(server.Poll(50));
    for (int r = 0; r < n; ++r) {
      if (result.exit_codes[r] >= 0) continue;
      StatusOr<int> rc = WaitExit(pids[r], std::chrono::milliseconds(0));
      if (!rc.ok()) continue;  // still running
      result.exit_codes[r] = *rc;
      --running;
      if (*rc != 0 && *rc != 3 && running > 0 && !server.aborted()) {
        // The others would wait for it at their next exchange: fail them now.
        server.Abort(fmt::format("rank {} exited with {}", r, *rc));
        deadline = std::min(deadline, std::chrono::steady_clock::now() + grace);
      }
    }
    if (running > 0 && std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = !server.aborted();
      for (int r = 0; r < n; ++r) {
        if (result.exit_codes[r] < 0) ::kill(pids[r], SIGKILL);
      }
      for (int r = 0; r < n; ++r) {
        if (result.exit_codes[r] >= 0) continue;
        StatusOr<int> rc = WaitExit(pids[r], std::chrono::seconds(10));
        result.exit_codes[r] = rc.ok() ? *rc : 128 + SIGKILL;
      }
      running = 0;
    }
  }
  result.abort_reason = server.abort_reason();
  return result;
}

std::string SelfExecutable(const std::string& argv0) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? argv0 : p.string();
}

int LaunchPerGpu(const BenchOptions& o, const std::vector<std::string>& args,
                 const std::string& self) {
  // Outputs fail before any GPU work (rank 0 writes them again).
  for (const std::string* p : {&o.csv_path, &o.json_path, &o.min_size_table_path}) {
    if (p->empty()) continue;
    if (Status s = WriteTextFile(*p, ""); !s.ok()) {
      std::fprintf(stderr, "qr-bench: %s\n", s.ToString().c_str());
      return 2;
    }
  }
  char dir_template[] = "/tmp/qr-bench.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr, "qr-bench: cannot make a temporary directory\n");
    return 1;
  }
  const std::string dir = dir_template;
  std::string torch_rows;
  if (o.torch_symm) {
    // Before the workers: the torch ranks need the GPUs to themselves. Rank 0
    // reads what the script wrote and records what went wrong.
    // Kept beside --csv (the script's own rows, torch-nccl and all).
    torch_rows = o.csv_path.empty() ? dir + "/torch.csv" : o.csv_path + ".torch.csv";
    StatusOr<TorchRows> t = RunTorchBaseline(o, torch_rows);
    if (!t.ok()) {
      std::fprintf(stderr, "qr-bench: %s\n", t.status().ToString().c_str());
      (void)WriteTextFile(torch_rows + ".error", t.status().ToString());
    }
  }
  int code = 1;
  const std::string coord = dir + "/coord.sock";
  StatusOr<CoordServer> server = CoordServer::Listen(coord, o.world_size);
  if (!server.ok()) {
    std::fprintf(stderr, "qr-bench: %s\n", server.status().ToString().c_str());
  } else {
    std::vector<std::vector<std::string>> argvs;
    for (int r = 0; r < o.world_size; ++r) {
      std::vector<std::string> argv = {self};
      for (std::string& a : WorkerArgs(args, r, coord, torch_rows)) argv.push_back(std::move(a));
      argvs.push_back(std::move(argv));
    }
    std::fprintf(stderr, "qr-bench: --launch per-gpu: %d worker processes (coordinator %s)\n",
                 o.world_size, coord.c_str());
    StatusOr<WorkerGroupResult> g =
        RunWorkerGroup(argvs, *server, std::chrono::seconds(o.launch_timeout_s));
    if (!g.ok()) {
      std::fprintf(stderr, "qr-bench: starting the workers: %s\n", g.status().ToString().c_str());
    } else {
      code = CombineWorkerExits(g->exit_codes);
      std::string codes;
      for (int c : g->exit_codes) codes += (codes.empty() ? "" : " ") + std::to_string(c);
      std::fprintf(
          stderr, "qr-bench: workers exited with %s%s%s\n", codes.c_str(),
          g->timed_out
              ? fmt::format(" (stopped at --launch-timeout {} s)", o.launch_timeout_s).c_str()
              : "",
          g->abort_reason.empty() ? "" : (" (" + g->abort_reason + ")").c_str());
      if (g->timed_out) code = 1;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return code;
}

}  // namespace qr::bench
