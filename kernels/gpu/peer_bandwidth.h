// Peer-store bandwidth: how fast one GPU can push stores into other GPUs'
// memory, the operation every quickreduce kernel is built on. qr-bench times
// LaunchPeerStore with events to get the link ceiling against which it
// reports "% of link limit" (16-byte stores from the threads, the kernels'
// method), and, for comparison, the same bytes written by TMA bulk copies
// from shared memory (issue 18 item 8: docs/performance.md, "TMA bulk
// stores"); qr-kernel-cost --peer-store times both on one GPU.
//
//   PeerStoreArgs a;
//   a.dst[0] = peer_buffer; a.num_dst = 1; a.bytes_per_dst = 256 << 20;
//   a.blocks = sms * 2; a.stream = stream;
//   a.method = PeerStoreMethod::kTmaBulk; a.chunk_bytes = 16 << 10;  // optional
//   QR_RETURN_IF_ERROR(LaunchPeerStore(a));   // enqueue; time with events
//
// Also the few device facts qr-bench records in its report (name, driver and
// runtime versions), which the neutral runtime API (kernels/platform/gpu_api.h)
// does not expose. No HIP types here: callable from g++ code.
#ifndef QR_KERNELS_GPU_PEER_BANDWIDTH_H_
#define QR_KERNELS_GPU_PEER_BANDWIDTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "kernels/platform/host_device.h"

namespace qr::kernels {

inline constexpr int kPeerStoreMaxDsts = 8;
inline constexpr int kPeerStoreThreads = 512;  // threads per block

// How the bytes leave the multiprocessors.
enum class PeerStoreMethod : int {
  // Every thread stores 16-byte vectors from registers (platform::StoreRemote16).
  kSmStores = 0,
  // Each block writes chunk_bytes of data into shared memory and one thread
  // hands it to the copy engine (platform::BulkCopySharedToGlobal, TMA),
  // double-buffered: the block fills chunk k+1 while chunk k is copied.
  // NVIDIA (sm_90) only.
  kTmaBulk = 1,
};
// "sm", "tma"; "?" out of range.
const char* PeerStoreMethodName(PeerStoreMethod method);
// Whether this build's platform has the method: kSmStores everywhere,
// kTmaBulk on NVIDIA only. Thread-safe, constant.
bool PeerStoreMethodAvailable(PeerStoreMethod method);

// kTmaBulk's copy size: a multiple of 16 bytes (the copy engine's rule) in
// this range. A block holds two chunks in shared memory, so 64 KiB chunks
// take 128 KiB of the 227 KiB an H200 block may have.
inline constexpr size_t kPeerStoreMinChunkBytes = 16;
inline constexpr size_t kPeerStoreMaxChunkBytes = size_t{64} << 10;

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
  PeerStoreMethod method = PeerStoreMethod::kSmStores;
  // kTmaBulk: bytes per bulk copy, a multiple of 16 in
  // kPeerStoreMinChunkBytes..kPeerStoreMaxChunkBytes; bytes_per_dst need not
  // be a multiple of it (the last chunk of a destination is shorter).
  // kSmStores ignores it.
  size_t chunk_bytes = 0;
};

// Every method writes the same bytes: the 16-byte vector i of a destination
// (bytes 16 i .. 16 i + 15) holds the uint32 words x, x + 1, x + 2, x + 3
// with x = i mod 2^32, little-endian (tests check every byte against this).
QR_HOST_DEVICE inline uint32_t PeerStorePatternWord(size_t vector_index, int word) {
  return static_cast<uint32_t>(vector_index) + static_cast<uint32_t>(word);
}

// The checks LaunchPeerStore makes before it launches, without launching:
// kInvalidArgument for a bad num_dst, bytes_per_dst, blocks, destination
// (null, not 16-byte aligned), method or chunk_bytes, each message naming
// the field; kUnsupported for kTmaBulk on a platform without it (AMD). Needs
// no GPU. Thread-safe.
[[nodiscard]] Status ValidatePeerStoreArgs(const PeerStoreArgs& args);

// Enqueues one kernel that writes bytes_per_dst bytes of the pattern above
// into every destination by `method`: kSmStores, every thread of the grid
// streams 16-byte stores (platform::StoreRemote16), grid-stride; kTmaBulk,
// the chunks of a destination are dealt round-robin to its blocks, each
// filled into shared memory and copied by the copy engine, and every copy
// has completed (its writes performed) when the kernel ends. Valid inside
// stream capture. The errors of ValidatePeerStoreArgs, kInternal on a
// launch error.
[[nodiscard]] Status LaunchPeerStore(const PeerStoreArgs& args);

// The device's marketing name ("NVIDIA H200"). kInternal/kUnavailable on errors.
[[nodiscard]] StatusOr<std::string> GpuDeviceName(int device);
// "driver <n>, runtime <m>" as the platform encodes them (CUDA: 13000 = 13.0).
[[nodiscard]] StatusOr<std::string> GpuDriverAndRuntimeVersions();

}  // namespace qr::kernels

#endif  // QR_KERNELS_GPU_PEER_BANDWIDTH_H_
