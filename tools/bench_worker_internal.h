// The worker of qr-bench --launch per-gpu (tools/bench_worker.h) as a class,
// its methods in two files by idea: setting up and tearing down what it drives
// (GPU, quickreduce's groups, NCCL classic and symmetric, PyTorch's rows:
// bench_worker_setup.cc) and the sweep with its timing (bench_worker.cc).
// Internal to //tools:bench_worker.
#ifndef QR_TOOLS_BENCH_WORKER_INTERNAL_H_
#define QR_TOOLS_BENCH_WORKER_INTERNAL_H_

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "comm/quickreduce.h"
#include "common/status.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_coord.h"
#include "tools/bench_gpu.h"
#include "tools/bench_nccl.h"
#include "tools/bench_options.h"
#include "tools/bench_output.h"
#include "tools/bench_plan.h"
#include "tools/bench_report.h"

namespace qr::bench::internal {

// What the JSON header says of the method.
extern const char* const kPerGpuTimingMethod;

class Worker {
 public:
  Worker(const BenchOptions& o, CoordClient coord, std::string command_line)
      : o_(o),
        ws_(o.world_size),
        rank_(o.worker_rank),
        coord_(std::move(coord)),
        start_(std::chrono::steady_clock::now()) {
    header_.world_size = ws_;
    header_.command_line = std::move(command_line);
    header_.date = UtcTimestamp();
    header_.timing_method = kPerGpuTimingMethod;
    header_.notes = o.notes;
  }

  int Run();

 private:
  bool lead() const { return rank_ == 0; }
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void Fail(const std::string& what) {
    if (!lead()) return;
    std::fprintf(stderr, "qr-bench: %s\n", what.c_str());
    header_.failures.push_back(what);
  }
  void Note(const std::string& what) {
    if (!lead()) return;
    std::fprintf(stderr, "qr-bench: note: %s\n", what.c_str());
    header_.notes.push_back(what);
  }
  Status SetupGpu();
  Status JoinQuickReduce();
  Status StartNccl();
  Status StartNcclSymmetric();
  void LoadTorchRows();
  // One call of c on this rank's stream.
  Status Call(const BenchCell& c);
  StatusOr<Measurement> TimeCell(const BenchCell& c);
  StatusOr<double> TimeMs(const std::function<Status()>& enqueue);
  void Teardown();

  const BenchOptions& o_;
  const int ws_;
  const int rank_;
  CoordClient coord_;
  const std::chrono::steady_clock::time_point start_;
  BenchHeader header_;
  BenchOutput output_{o_, header_};
  int device_ = 0;
  bool shared_ = false;  // fewer GPUs than ranks
  gpu::ScopedStream stream_;
  gpu::ScopedEvent ev_start_, ev_stop_;
  DeviceBuffers buffers_;  // in[0], out[0]: this rank's
  qr_comm* two_shot_ = nullptr;
  qr_comm* one_shot_ = nullptr;
  bool have_qr_ = false;
  Nccl nccl_;
  Nccl::Comm comm_ = nullptr;
  bool have_nccl_ = false;
  void* symm_in_ = nullptr;
  void* symm_out_ = nullptr;
  Nccl::Window win_in_ = nullptr, win_out_ = nullptr;
  bool have_symm_ = false;
};

}  // namespace qr::bench::internal

#endif  // QR_TOOLS_BENCH_WORKER_INTERNAL_H_
