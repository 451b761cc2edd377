// Peer-store bandwidth: how fast one GPU can push 16-byte stores into other
// GPUs' memory, the operation every quickreduce kernel is built on. qr-bench
// times LaunchPeerStore with events to get the link ceiling against which it
// reports "% of link limit".
//
//   PeerStoreArgs a;
//   a.dst[0] = peer_buffer; a.num_dst = 1; a.bytes_per_dst = 256 << 20;
//   a.blocks = sms * 2; a.stream = stream;
//   QR_RETURN_IF_ERROR(LaunchPeerStore(a));   // enqueue; time with events
//
// Also the few device facts qr-bench records in its report (name, driver and
// runtime versions), which the neutral runtime API (kernels/platform/gpu_api.h)
// does not expose. No HIP types here: callable from g++ code.
#ifndef QR_KERNELS_GPU_PEER_BANDWIDTH_H_
#define QR_KERNELS_GPU_PEER_BANDWIDTH_H_

#include <array>
#include <cstddef>
#include <string>

#include "common/status.h"

namespace qr::kernels {

inline constexpr int kPeerStoreMaxDsts = 8;
inline constexpr int kPeerStoreThreads = 512;  // threads per block

struct PeerStoreArgs {
  // Destination buffers as addressed from the launching (current) device:
  // peer memory reachable through peer access or an IPC mapping, 16-byte
  // aligned, each at least bytes_per_dst long. Contents are overwritten with
  // an index pattern.
  std::array<void*, kPeerStoreMaxDsts> dst{};
  int num_dst = 0;           // 1..kPeerStoreMaxDsts
  size_t bytes_per_dst = 0;  // > 0, multiple of 16
  // Grid size: blocks are dealt round-robin to destinations, so every
  // destination gets blocks / num_dst of them (blocks >= num_dst).
  int blocks = 0;
  void* stream = nullptr;  // hipStream_t of the current device
};

// Enqueues one kernel in which every thread of the grid streams 16-byte
// stores (platform::StoreRemote16) into its destination, grid-stride, until
// bytes_per_dst bytes of every destination are written. Valid inside stream
// capture. kInvalidArgument for bad arguments, kInternal on a launch error.
[[nodiscard]] Status LaunchPeerStore(const PeerStoreArgs& args);

// The device's marketing name ("NVIDIA H200"). kInternal/kUnavailable on errors.
[[nodiscard]] StatusOr<std::string> GpuDeviceName(int device);
// "driver <n>, runtime <m>" as the platform encodes them (CUDA: 13000 = 13.0).
[[nodiscard]] StatusOr<std::string> GpuDriverAndRuntimeVersions();

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_PEER_BANDWIDTH_H_
