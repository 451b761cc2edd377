// qr-bench (first cut): per-call time of quickreduce's two-shot all-reduce on
// this machine's GPUs, graph-captured, against NCCL's ncclAllReduce timed in
// the same run on the same buffers. One process drives world_size GPUs (peer
// access; the kernel is the one the GPU backend launches). NCCL (or RCCL) is
// loaded at run time, so the binary builds without it.
//
//   qr-bench [--sizes 4K,64K,1M,...] [--regimes FP,INT8,...] [--dtypes fp16,bf16,bf16cast]
//            [--world-size 2] [--csv out.csv] [--no-nccl]
//
// CSV columns: bytes,dtype,impl,us_per_call,algbw_GBps,nccl_us,ratio_vs_nccl
// (ratio < 1: quickreduce is faster). Exit code 0 on success.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "kernels/float16.h"
#include "kernels/gpu/local_group.h"
#include "kernels/gpu/two_shot.h"
#include "kernels/platform/gpu_api.h"

namespace qr {
namespace {

using kernels::GpuCodec;
using kernels::GpuElem;

// --- NCCL through dlopen: the handful of entry points we use. -------------
struct Nccl {
  using Comm = void*;
  int (*CommInitAll)(Comm*, int, const int*) = nullptr;
  int (*CommDestroy)(Comm) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  int (*GroupStart)() = nullptr;
  int (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
  static constexpr int kFloat16 = 6, kBfloat16 = 9, kSum = 0;

  bool Load() {
    void* h = nullptr;
    for (const char* name : {"libnccl.so.2", "libnccl.so", "librccl.so.1", "librccl.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      std::fprintf(stderr, "qr-bench: NCCL/RCCL not found (%s); no baseline\n", dlerror());
      return false;
    }
    CommInitAll = reinterpret_cast<decltype(CommInitAll)>(dlsym(h, "ncclCommInitAll"));
    CommDestroy = reinterpret_cast<decltype(CommDestroy)>(dlsym(h, "ncclCommDestroy"));
    AllReduce = reinterpret_cast<decltype(AllReduce)>(dlsym(h, "ncclAllReduce"));
    GroupStart = reinterpret_cast<decltype(GroupStart)>(dlsym(h, "ncclGroupStart"));
    GroupEnd = reinterpret_cast<decltype(GroupEnd)>(dlsym(h, "ncclGroupEnd"));
    GetErrorString = reinterpret_cast<decltype(GetErrorString)>(dlsym(h, "ncclGetErrorString"));
    return CommInitAll && CommDestroy && AllReduce && GroupStart && GroupEnd && GetErrorString;
  }
};

Status NcclCheck(const Nccl& n, int r, const char* what) {
  if (r == 0) return OkStatus();
  return InternalError(std::string(what) + ": " + n.GetErrorString(r));
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

size_t ParseSize(const std::string& s) {
  size_t mult = 1;
  std::string num = s;
  const char last = s.empty() ? 0 : s.back();
  if (last == 'K' || last == 'k') mult = 1024;
  if (last == 'M' || last == 'm') mult = 1024 * 1024;
  if (last == 'G' || last == 'g') mult = 1024ull * 1024 * 1024;
  if (mult != 1) num = s.substr(0, s.size() - 1);
  return static_cast<size_t>(std::strtoull(num.c_str(), nullptr, 10)) * mult;
}

std::string SizeName(size_t b) {
  char buf[32];
  if (b >= (1u << 30) && b % (1u << 30) == 0) {
    std::snprintf(buf, sizeof(buf), "%zuG", b >> 30);
  } else if (b >= (1u << 20) && b % (1u << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%zuM", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%zuK", b >> 10);
  } else {
    std::snprintf(buf, sizeof(buf), "%zu", b);
  }
  return buf;
}

struct Options {
  std::vector<size_t> sizes;
  std::vector<GpuCodec> regimes;
  std::vector<GpuElem> dtypes;
  int world_size = 2;
  int max_blocks = 0;  // 0: the backend's default
  std::string csv;
  bool nccl = true;
};

// Times `replays` launches of each rank's graph (holding `calls` ops); returns
// microseconds per op as seen on rank 0's stream.
StatusOr<double> TimeGraphs(const std::vector<gpu::GraphExec>& graphs,
                            const std::vector<void*>& streams, int calls) {
  const int ws = static_cast<int>(graphs.size());
  auto launch_all = [&]() -> Status {
    for (int r = 0; r < ws; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_RETURN_IF_ERROR(gpu::GraphLaunch(graphs[r], streams[r]));
    }
    return OkStatus();
  };
  auto sync_all = [&]() -> Status {
    for (int r = 0; r < ws; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams[r]));
    }
    return OkStatus();
  };
  QR_RETURN_IF_ERROR(launch_all());  // warm-up
  QR_RETURN_IF_ERROR(sync_all());
  // Probe the cost of one replay to pick a repeat count (~20 ms).
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_ASSIGN_OR_RETURN(gpu::Event e0, gpu::EventCreate());
  QR_ASSIGN_OR_RETURN(gpu::Event e1, gpu::EventCreate());
  QR_RETURN_IF_ERROR(gpu::EventRecord(e0, streams[0]));
  QR_RETURN_IF_ERROR(launch_all());
  QR_RETURN_IF_ERROR(gpu::SetDevice(0));
  QR_RETURN_IF_ERROR(gpu::EventRecord(e1, streams[0]));
  QR_RETURN_IF_ERROR(sync_all());
  QR_ASSIGN_OR_RETURN(float probe_ms, gpu::EventElapsedMs(e0, e1));
  const int reps = std::max(3, std::min(200, static_cast<int>(20.0 / std::max(probe_ms, 0.001f))));
  std::vector<double> samples;
  for (int trial = 0; trial < 3; ++trial) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_RETURN_IF_ERROR(gpu::EventRecord(e0, streams[0]));
    for (int i = 0; i < reps; ++i) QR_RETURN_IF_ERROR(launch_all());
    QR_RETURN_IF_ERROR(gpu::SetDevice(0));
    QR_RETURN_IF_ERROR(gpu::EventRecord(e1, streams[0]));
    QR_RETURN_IF_ERROR(sync_all());
    QR_ASSIGN_OR_RETURN(float ms, gpu::EventElapsedMs(e0, e1));
    samples.push_back(ms * 1000.0 / (static_cast<double>(reps) * calls));
  }
  gpu::EventDestroy(e0);
  gpu::EventDestroy(e1);
  std::sort(samples.begin(), samples.end());
  return samples[1];  // median of 3
}

// NCCL's all-reduce, graph-captured: one thread per GPU captures its rank's
// calls (thread-local capture mode), then the graphs are replayed together.
StatusOr<double> TimeNccl(const Nccl& nccl, const std::vector<Nccl::Comm>& comms,
                          const std::vector<void*>& in, const std::vector<void*>& out,
                          const std::vector<void*>& streams, size_t count, int dtype, int calls) {
  const int ws = static_cast<int>(comms.size());
  // Eager warm-up: NCCL connects lazily at the first collective, which must
  // not happen inside a capture.
  QR_RETURN_IF_ERROR(NcclCheck(nccl, nccl.GroupStart(), "ncclGroupStart"));
  for (int r = 0; r < ws; ++r) {
    QR_RETURN_IF_ERROR(NcclCheck(
        nccl, nccl.AllReduce(in[r], out[r], count, dtype, Nccl::kSum, comms[r], streams[r]),
        "ncclAllReduce"));
  }
  QR_RETURN_IF_ERROR(NcclCheck(nccl, nccl.GroupEnd(), "ncclGroupEnd"));
  for (int r = 0; r < ws; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(r));
    QR_RETURN_IF_ERROR(gpu::StreamSynchronize(streams[r]));
  }
  std::vector<gpu::GraphExec> graphs(ws, nullptr);
  std::vector<Status> st(ws);
  std::vector<std::thread> threads;
  for (int r = 0; r < ws; ++r) {
    threads.emplace_back([&, r] {
      st[r] = [&]() -> Status {
        QR_RETURN_IF_ERROR(gpu::SetDevice(r));
        QR_RETURN_IF_ERROR(gpu::BeginCaptureThreadLocal(streams[r]));
        Status s;
        for (int i = 0; i < calls && s.ok(); ++i) {
          s = NcclCheck(nccl, nccl.AllReduce(in[r], out[r], count, dtype, Nccl::kSum, comms[r],
                                             streams[r]),
                        "ncclAllReduce");
        }
        auto g = gpu::EndCapture(streams[r]);
        QR_RETURN_IF_ERROR(s);
        QR_RETURN_IF_ERROR(g.status());
        graphs[r] = *g;
        return OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ws; ++r) QR_RETURN_IF_ERROR(st[r]);
  auto us = TimeGraphs(graphs, streams, calls);
  for (int r = 0; r < ws; ++r) {
    (void)gpu::SetDevice(r);
    gpu::GraphDestroy(graphs[r]);
  }
  return us;
}

int CallsPerGraph(size_t bytes) {
  return static_cast<int>(std::max<size_t>(2, std::min<size_t>(50, (256u << 20) / bytes)));
}

Status Run(const Options& o) {
  QR_ASSIGN_OR_RETURN(auto group, kernels::LocalGroup::Create(o.world_size, o.max_blocks));
  const int ws = o.world_size;
  Nccl nccl;
  std::vector<Nccl::Comm> comms(ws, nullptr);
  bool have_nccl = o.nccl && nccl.Load();
  if (have_nccl) {
    std::vector<int> devs(ws);
    for (int r = 0; r < ws; ++r) devs[r] = r;
    const int rc = nccl.CommInitAll(comms.data(), ws, devs.data());
    if (rc != 0) {
      std::fprintf(stderr, "qr-bench: ncclCommInitAll: %s\n", nccl.GetErrorString(rc));
      have_nccl = false;
    }
  }
  std::vector<void*> streams(ws);
  for (int r = 0; r < ws; ++r) streams[r] = group->stream(r);

  const size_t max_bytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  std::vector<void*> in(ws), out(ws);
  {
    // Random-looking fp16/bf16 data (never zeros): a 16 MiB pattern tiled.
    const size_t pat_elems = 8u << 20;
    std::vector<uint16_t> pat(pat_elems);
    uint64_t x = 88172645463325252ull;
    for (auto& v : pat) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      v = kernels::FloatToHalf((static_cast<float>(x >> 40) / 16777216.0f - 0.5f) * 4.0f);
    }
    for (int r = 0; r < ws; ++r) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_ASSIGN_OR_RETURN(in[r], gpu::Malloc(max_bytes));
      QR_ASSIGN_OR_RETURN(out[r], gpu::Malloc(max_bytes));
      for (size_t off = 0; off < max_bytes; off += pat_elems * 2) {
        QR_RETURN_IF_ERROR(gpu::Memcpy(static_cast<char*>(in[r]) + off, pat.data(),
                                       std::min(pat_elems * 2, max_bytes - off)));
      }
    }
  }

  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (!o.csv.empty() && csv == nullptr) return InvalidArgumentError("cannot write " + o.csv);
  if (csv) std::fprintf(csv, "bytes,dtype,impl,us_per_call,algbw_GBps,nccl_us,ratio_vs_nccl\n");
  std::printf("%-8s %-9s", "size", "dtype");
  for (GpuCodec c : o.regimes) std::printf(" %10s", CodecName(static_cast<Codec>(c)));
  std::printf(" %10s   ratios (qr/nccl)\n", "NCCL");

  for (size_t bytes : o.sizes) {
    const size_t count = bytes / 2;
    const int calls = CallsPerGraph(bytes);
    for (GpuElem elem : o.dtypes) {
      const char* dname = elem == GpuElem::kFp16 ? "fp16" : elem == GpuElem::kBf16 ? "bf16" : "bf16cast";
      double nccl_us = 0;
      if (have_nccl) {
        auto t = TimeNccl(nccl, comms, in, out, streams, count,
                          elem == GpuElem::kFp16 ? Nccl::kFloat16 : Nccl::kBfloat16, calls);
        if (t.ok()) {
          nccl_us = *t;
        } else {
          std::fprintf(stderr, "qr-bench: NCCL baseline failed, continuing without it: %s\n",
                       t.status().ToString().c_str());
          have_nccl = false;
        }
      }
      std::vector<double> qr_us;
      for (GpuCodec codec : o.regimes) {
        if (codec == GpuCodec::kInt3 && ws != 2) {
          qr_us.push_back(0);
          continue;
        }
        kernels::LocalCall call{elem, codec, count, 10000};
        std::vector<gpu::GraphExec> graphs(ws, nullptr);
        for (int r = 0; r < ws; ++r) {
          QR_RETURN_IF_ERROR(gpu::SetDevice(r));
          QR_RETURN_IF_ERROR(gpu::BeginCapture(streams[r]));
          for (int i = 0; i < calls; ++i) QR_RETURN_IF_ERROR(group->Launch(r, call, in[r], out[r]));
          QR_ASSIGN_OR_RETURN(graphs[r], gpu::EndCapture(streams[r]));
        }
        QR_ASSIGN_OR_RETURN(double us, TimeGraphs(graphs, streams, calls));
        for (int r = 0; r < ws; ++r) {
          QR_RETURN_IF_ERROR(gpu::SetDevice(r));
          gpu::GraphDestroy(graphs[r]);
          if (group->error(r) != kernels::kGpuErrorNone) {
            return InternalError("kernel reported error " + std::to_string(group->error(r)));
          }
        }
        qr_us.push_back(us);
        if (csv) {
          std::fprintf(csv, "%zu,%s,qr-%s,%.3f,%.2f,%.3f,%.3f\n", bytes, dname,
                       CodecName(static_cast<Codec>(codec)), us, bytes / us / 1e3, nccl_us,
                       nccl_us > 0 ? us / nccl_us : 0.0);
        }
      }
      if (csv && have_nccl) {
        std::fprintf(csv, "%zu,%s,nccl,%.3f,%.2f,%.3f,1.000\n", bytes, dname, nccl_us,
                     bytes / nccl_us / 1e3, nccl_us);
      }
      if (csv) std::fflush(csv);
      std::printf("%-8s %-9s", SizeName(bytes).c_str(), dname);
      for (double us : qr_us) std::printf(" %10.2f", us);
      std::printf(" %10.2f  ", nccl_us);
      for (double us : qr_us) std::printf(" %.2f", nccl_us > 0 ? us / nccl_us : 0.0);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (csv) std::fclose(csv);
  for (int r = 0; r < ws; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(r));
    gpu::Free(in[r]);
    gpu::Free(out[r]);
    if (have_nccl) nccl.CommDestroy(comms[r]);
  }
  return OkStatus();
}

}  // namespace
}  // namespace qr

int main(int argc, char** argv) {
  using qr::kernels::GpuCodec;
  using qr::kernels::GpuElem;
  qr::Options o;
  std::string sizes = "4K,16K,64K,256K,1M,2M,4M,16M,64M,256M,1G";
  std::string regimes = "FP,INT8,INT6,INT4,INT3";
  std::string dtypes = "fp16,bf16,bf16cast";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--sizes") sizes = next();
    else if (a == "--regimes") regimes = next();
    else if (a == "--dtypes") dtypes = next();
    else if (a == "--world-size") o.world_size = std::atoi(next().c_str());
    else if (a == "--csv") o.csv = next();
    else if (a == "--max-blocks") o.max_blocks = std::atoi(next().c_str());
    else if (a == "--no-nccl") o.nccl = false;
    else {
      std::fprintf(stderr, "usage: qr-bench [--sizes 4K,1M,...] [--regimes FP,INT8,INT6,INT4,INT3] "
                           "[--dtypes fp16,bf16,bf16cast] [--world-size N] [--csv FILE] [--no-nccl]\n");
      return 2;
    }
  }
  for (const auto& s : qr::Split(sizes)) {
    const size_t b = qr::ParseSize(s);
    if (b == 0 || b % 16 != 0) {
      std::fprintf(stderr, "qr-bench: size %s must be a positive multiple of 16 bytes\n", s.c_str());
      return 2;
    }
    o.sizes.push_back(b);
  }
  const std::map<std::string, GpuCodec> codecs = {{"FP", GpuCodec::kFp},     {"INT8", GpuCodec::kInt8},
                                                  {"INT6", GpuCodec::kInt6}, {"INT4", GpuCodec::kInt4},
                                                  {"INT3", GpuCodec::kInt3}};
  for (const auto& s : qr::Split(regimes)) {
    auto it = codecs.find(s);
    if (it == codecs.end()) {
      std::fprintf(stderr, "qr-bench: regime %s is not one of FP, INT8, INT6, INT4, INT3\n", s.c_str());
      return 2;
    }
    o.regimes.push_back(it->second);
  }
  for (const auto& s : qr::Split(dtypes)) {
    if (s == "fp16") o.dtypes.push_back(GpuElem::kFp16);
    else if (s == "bf16") o.dtypes.push_back(GpuElem::kBf16);
    else if (s == "bf16cast") o.dtypes.push_back(GpuElem::kBf16Cast);
    else {
      std::fprintf(stderr, "qr-bench: dtype %s is not one of fp16, bf16, bf16cast\n", s.c_str());
      return 2;
    }
  }
  if (o.sizes.empty() || o.regimes.empty() || o.dtypes.empty()) return 2;
  qr::Status s = qr::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "qr-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
