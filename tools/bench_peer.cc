#include "tools/bench_peer.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "kernels/gpu/peer_bandwidth.h"
#include "kernels/platform/gpu_api.h"
#include "tools/bench_gpu.h"

namespace qr::bench {

// The flags' chunk rule (host-only code) is the launcher's.
static_assert(kTmaChunkMinBytes == kernels::kPeerStoreMinChunkBytes);
static_assert(kTmaChunkMaxBytes == kernels::kPeerStoreMaxChunkBytes);

void SetPeerStoreMethod(const PeerStoreChoice& choice, kernels::PeerStoreArgs& args) {
  args.method =
      choice.tma ? kernels::PeerStoreMethod::kTmaBulk : kernels::PeerStoreMethod::kSmStores;
  args.chunk_bytes = choice.chunk_bytes;
}

StatusOr<PeerBandwidth> MeasurePeerBandwidth(const std::vector<void*>& streams, size_t bytes,
                                             int reps, const PeerStoreChoice& method) {
  const int ws = static_cast<int>(streams.size());
  PeerBandwidth pb;
  pb.method = PeerStoreChoiceName(method);
  pb.bytes = bytes;
  pb.reps = reps;
  // recv[p] holds one region per source rank, so sources never share lines.
  std::vector<gpu::DeviceBuffer> recv;
  std::vector<kernels::PeerStoreArgs> args(ws);
  for (int p = 0; p < ws; ++p) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(p));
    QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::Malloc(bytes * ws));
    recv.push_back(std::move(b));
  }
  for (int r = 0; r < ws; ++r) {
    QR_ASSIGN_OR_RETURN(int sms, gpu::MultiprocessorCount(r));
    args[r].blocks = std::max(sms * 2, ws);
    args[r].bytes_per_dst = bytes;
    args[r].stream = streams[r];
    SetPeerStoreMethod(method, args[r]);
    for (int p = 0; p < ws; ++p) {
      if (p != r) args[r].dst[args[r].num_dst++] = recv[p].as<char>() + r * bytes;
    }
  }
  std::vector<gpu::ScopedEvent> start, stop;
  for (int r = 0; r < ws; ++r) {
    QR_RETURN_IF_ERROR(gpu::SetDevice(r));
    QR_ASSIGN_OR_RETURN(gpu::ScopedEvent e0, gpu::ScopedEvent::Create());
    QR_ASSIGN_OR_RETURN(gpu::ScopedEvent e1, gpu::ScopedEvent::Create());
    start.push_back(std::move(e0));
    stop.push_back(std::move(e1));
  }
  // One round over `ranks`, all storing together; GB/s per rank.
  auto round = [&](const std::vector<int>& ranks) -> StatusOr<std::vector<double>> {
    for (int r : ranks) {  // warm-up
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_RETURN_IF_ERROR(kernels::LaunchPeerStore(args[r]));
    }
    QR_RETURN_IF_ERROR(SyncAll(streams));
    for (int r : ranks) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_RETURN_IF_ERROR(gpu::EventRecord(start[r].get(), streams[r]));
    }
    for (int i = 0; i < reps; ++i) {
      for (int r : ranks) {
        QR_RETURN_IF_ERROR(gpu::SetDevice(r));
        QR_RETURN_IF_ERROR(kernels::LaunchPeerStore(args[r]));
      }
    }
    for (int r : ranks) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_RETURN_IF_ERROR(gpu::EventRecord(stop[r].get(), streams[r]));
    }
    QR_RETURN_IF_ERROR(SyncAll(streams));
    std::vector<double> gbps;
    for (int r : ranks) {
      QR_RETURN_IF_ERROR(gpu::SetDevice(r));
      QR_ASSIGN_OR_RETURN(float ms, gpu::EventElapsedMs(start[r].get(), stop[r].get()));
      const double sent = static_cast<double>(bytes) * args[r].num_dst * reps;
      gbps.push_back(sent / (static_cast<double>(ms) * 1e6));
    }
    return gbps;
  };
  std::vector<int> all(ws);
  for (int r = 0; r < ws; ++r) all[r] = r;
  QR_ASSIGN_OR_RETURN(pb.concurrent_gbps, round(all));
  for (int r = 0; r < ws; ++r) {
    QR_ASSIGN_OR_RETURN(std::vector<double> alone, round({r}));
    pb.alone_gbps.push_back(alone[0]);
  }
  return pb;
}

}  // namespace qr::bench
