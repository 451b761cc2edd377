// qr-test-member: one group member for manual and scripted broker checks.
//
//   qr-test-member --socket S --group G --rank R --world-size W [--device D]
//                  [--ops N] [--hold-s S]
// Joins, publishes, waits for READY, counts N INT4 ops of 1 MiB, then holds
// (polling Check) for --hold-s seconds or until the group fails (with
// --stay-on-failure: still until --hold-s ends), and leaves.
// Exit 0 on a clean leave, 4 when the group failed, 1 on a join error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "ipc/group_client.h"

int main(int argc, char** argv) {
  CLI::App app{"quickreduce test member"};
  qr::ipc::JoinParams p;
  p.device_id = "host";
  p.buffer_bytes = 1 << 20;
  int ops = 0;
  double hold_s = 0;
  bool stay = false;
  app.add_option("--socket", p.socket_path);
  app.add_option("--group", p.group)->required();
  app.add_option("--rank", p.rank)->required();
  app.add_option("--world-size", p.world_size)->required();
  app.add_option("--device", p.device_id);
  app.add_option("--ops", ops);
  app.add_option("--hold-s", hold_s);
  app.add_flag("--stay-on-failure", stay, "keep the rank until --hold-s ends after a failure");
  CLI11_PARSE(app, argc, argv);
  p.autostart = false;
  auto m = qr::ipc::GroupMembership::Join(p);
  if (!m.ok()) {
    std::fprintf(stderr, "join: %s\n", m.status().ToString().c_str());
    return 1;
  }
  std::array<uint8_t, qr::ipc::kBlobBytes> blob{};
  qr::Status s = (*m)->PublishAndWaitReady(qr::ipc::BlobKind::kHostSegment, blob);
  if (!s.ok()) {
    std::fprintf(stderr, "ready: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("rank %d pid %d READY in generation %llu\n", p.rank, ::getpid(),
              static_cast<unsigned long long>((*m)->generation()));
  std::fflush(stdout);
  for (int i = 0; i < ops; ++i) (*m)->CountOp(3, 1 << 20);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(hold_s);
  while (std::chrono::steady_clock::now() < end) {
    qr::Status c = (*m)->Check();
    if (!c.ok()) {
      std::printf("rank %d: %s\n", p.rank, c.ToString().c_str());
      std::fflush(stdout);
      if (stay) std::this_thread::sleep_until(end);
      (void)(*m)->Leave();
      return 4;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return (*m)->Leave().ok() ? 0 : 1;
}
