// qr-reliability: the figures of docs/broker.md "Reliability" (client side).
//
//   qr-reliability peer-kill [--setups broker,restart,none] [--sizes-mib 32,128]
//                            [--repeat 20] [--regime FP] [--device N]
//   qr-reliability cycles [--cycles 10000] [--minutes 15] [--snapshot-every 1000]  (host)
//   qr-reliability shm-needs [--device N]
//   qr-reliability shm-full          (in a private mount namespace, see below)
//   qr-reliability reserve-cost [--repeat 15]
//
// peer-kill: two ranks (processes of this binary) stream fp16 all-reduces of
// the given size; rank 1 is SIGKILLed in the middle of one and the time until
// rank 0's call returns QR_PEER_FAILED is measured on CLOCK_MONOTONIC. Setups:
// the broker runs throughout (broker); the broker is SIGKILLed and restarted
// while the group is READY, and the new broker adopts it (restart); the broker
// is SIGKILLed after the group formed and not restarted (none). After each
// trial: the survivor's descriptors after Leave against before Join, the
// group's /dev/shm objects, the broker's descriptors.
//
// cycles: join/leave cycles of a two-rank host group (ranks are threads of
// this process) against one broker, with the broker's RSS and descriptors,
// ours, and this uid's /dev/shm objects at every snapshot.
//
// shm-needs: forms groups of world size 2, 4 and 8 (processes) and reports
// what they hold in /dev/shm, per group and per rank.
//
// reserve-cost: times reserving (posix_fallocate) and freeing a host buffer
// of 4 to 20 MiB, what every host join and leave pays.
//
// shm-full: refuses to run unless /dev/shm is a small tmpfs (at most 1 GiB),
// e.g. Docker's default of 64 MiB in a private mount namespace:
//   unshare -m sh -c 'mount --make-rprivate / &&
//     mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm && qr-reliability shm-full'
// A second host group that does not fit, and one on a completely full
// /dev/shm, must fail their joins with QR_UNAVAILABLE "not enough shared
// memory: need N MiB in /dev/shm, M free" within the join timeout (no rank
// hangs), the broker must answer, and once space is freed the same group must
// form; nothing may be left behind. Exit code 1 when an expectation fails.
//
// --device N runs the ranks on GPU N (all ranks on that one GPU, under MPS,
// with QR_ALLOW_SHARED_DEVICE=1 set for them); default: the host backend.
#include <string>

#include "CLI/CLI.hpp"
#include "ipc/broker_binary.h"
#include "tests/reliability/ranks.h"
#include "tests/reliability/subcommands.h"

namespace qr::testing::reliability {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{"qr-reliability: fault and lifecycle figures (docs/broker.md, Reliability)"};
  app.require_subcommand(1);
  std::string broker_bin;
  int device = kDeviceHost;
  app.add_option("--broker", broker_bin,
                 "the qr-broker binary (default: beside this one, as tools/gpu/stage.sh lays "
                 "them out, else in the runfiles)");
  app.add_option("--device", device, "GPU ordinal for every rank (default: the host backend)");

  CLI::App* kill = app.add_subcommand("peer-kill", "SIGKILL a peer mid all-reduce");
  std::string setups = "broker,restart,none", sizes = "32,128", regime = "FP";
  int repeat = 20;
  kill->add_option("--setups", setups, "comma-separated: broker, restart, none");
  kill->add_option("--sizes-mib", sizes, "message sizes in MiB (fp16)");
  kill->add_option("--repeat", repeat, "trials per setup and size");
  kill->add_option("--regime", regime, "FP, INT8, INT6, INT4, INT3");

  CLI::App* cycles = app.add_subcommand("cycles", "join/leave cycles against one broker");
  int n_cycles = 10000, every = 1000;
  double minutes = 15;
  cycles->add_option("--cycles", n_cycles, "cycles to run");
  cycles->add_option("--minutes", minutes, "stop after this long even if fewer ran");
  cycles->add_option("--snapshot-every", every, "cycles between two resource snapshots");
  int cycles_world_size = 2;
  cycles->add_option("--world-size", cycles_world_size, "ranks (threads) per group")
      ->check(CLI::IsMember({2, 4, 8}));

  CLI::App* needs = app.add_subcommand("shm-needs", "what groups hold in /dev/shm");
  CLI::App* reserve = app.add_subcommand("reserve-cost", "time to reserve and free host buffers");
  int reserve_repeat = 15;
  reserve->add_option("--repeat", reserve_repeat, "samples per size");
  CLI::App* full = app.add_subcommand("shm-full", "joins on a full /dev/shm (private tmpfs)");

  WorkerFlags w;
  CLI::App* worker = app.add_subcommand("_worker", "one rank (internal)");
  worker->group("");  // hidden
  worker->add_option("--group", w.group)->required();
  worker->add_option("--dir", w.dir)->required();
  worker->add_option("--mode", w.mode);
  worker->add_option("--rank", w.rank);
  worker->add_option("--ws", w.world_size);
  worker->add_option("--device", w.device);
  worker->add_option("--count", w.count);
  worker->add_option("--regime", w.regime);
  for (CLI::App* sub : {kill, cycles, needs, full}) {
    sub->add_option("--device", device, "GPU ordinal for every rank (default: the host backend)");
  }
  CLI11_PARSE(app, argc, argv);

  if (worker->parsed()) return Worker(w);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (reserve->parsed()) return ReserveCost(reserve_repeat);  // no broker
  // Never one on $PATH: the figures are of the broker built with this tool.
  StatusOr<std::string> found =
      ipc::FindBrokerBinary(ipc::BrokerSearchFromEnvironment(broker_bin, /*search_path=*/false));
  if (!found.ok()) {
    std::fprintf(stderr, "qr-reliability: %s (give --broker)\n", found.status().ToString().c_str());
    return 64;
  }
  broker_bin = *found;
  if (kill->parsed()) return PeerKill(broker_bin, setups, sizes, repeat, regime, device);
  if (cycles->parsed()) {
    if (device >= 0) {
      // Its ranks are threads of one process, which cannot open its own GPU
      // IPC handles.
      std::fprintf(stderr, "cycles measures the host backend only\n");
      return 64;
    }
    return Cycles(broker_bin, n_cycles, minutes, every, cycles_world_size);
  }
  if (needs->parsed()) return ShmNeeds(broker_bin, device);
  if (full->parsed()) {
    if (device >= 0) {
      std::fprintf(stderr, "shm-full measures the host backend (GPU groups hold 12 KiB)\n");
      return 64;
    }
    return ShmFull(broker_bin);
  }
  return 64;
}

}  // namespace
}  // namespace qr::testing::reliability

int main(int argc, char** argv) { return qr::testing::reliability::Main(argc, argv); }
