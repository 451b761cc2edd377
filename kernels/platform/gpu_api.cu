#include <hip/hip_runtime.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "common/status_macros.h"
#include "kernels/platform/device_macros.h"
#include "kernels/platform/gpu_api.h"
#include "kernels/platform/gpu_status.h"

namespace qr::gpu {
namespace {

hipStream_t S(Stream s) { return static_cast<hipStream_t>(s); }

// Cleanup paths cannot fail; say what went wrong and carry on.
void Warn(hipError_t e, const char* what) {
  if (e != hipSuccess) std::fprintf(stderr, "quickreduce: %s: %s\n", what, hipGetErrorString(e));
}

}  // namespace

int DeviceCount() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return n;
}

Status SetDevice(int device) {
  if (device < 0 || device >= DeviceCount()) {
    return UnavailableError("GPU " + std::to_string(device) + " does not exist (" +
                            std::to_string(DeviceCount()) + " visible)");
  }
  QR_GPU_RETURN_IF_ERROR(hipSetDevice(device));
  return OkStatus();
}

StatusOr<int> GetDevice() {
  int d = 0;
  QR_GPU_RETURN_IF_ERROR(hipGetDevice(&d));
  return d;
}

StatusOr<std::string> PciBusId(int device) {
  char buf[64] = {};
  QR_GPU_RETURN_IF_ERROR(hipDeviceGetPCIBusId(buf, sizeof(buf), device));
  std::string id(buf);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id;
}

StatusOr<int> MultiprocessorCount(int device) {
  int n = 0;
  QR_GPU_RETURN_IF_ERROR(hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount, device));
  return n;
}

StatusOr<int64_t> WallClockTicksPerMs(int device) {
#if QR_PLATFORM_CUDA
  (void)device;
  return int64_t{1000000};  // %globaltimer counts nanoseconds
#else
  (void)device;
  // s_memrealtime runs at a constant 100 MHz on gfx90a/gfx94x (HIP 5.2 has
  // no attribute to query it).
  return int64_t{100000};
#endif
}

StatusOr<bool> CanAccessPeer(int device, int peer) {
  int can = 0;
  QR_GPU_RETURN_IF_ERROR(hipDeviceCanAccessPeer(&can, device, peer));
  return can != 0;
}

Status EnablePeerAccess(int peer) {
  // Enable each (device, peer) pair once per process: a second enable is an
  // error the runtime (and compute-sanitizer) reports.
  static std::mutex mu;
  static std::set<std::pair<int, int>> enabled;
  QR_ASSIGN_OR_RETURN(int device, GetDevice());
  std::lock_guard<std::mutex> lock(mu);
  if (enabled.count({device, peer}) != 0) return OkStatus();
  hipError_t e = hipDeviceEnablePeerAccess(peer, 0);
  if (e == hipSuccess) enabled.insert({device, peer});
  if (e == hipErrorPeerAccessAlreadyEnabled) {
    (void)hipGetLastError();
    return OkStatus();
  }
  QR_GPU_RETURN_IF_ERROR(e);
  return OkStatus();
}

StatusOr<void*> Malloc(size_t bytes) {
  void* p = nullptr;
  QR_GPU_RETURN_IF_ERROR(hipMalloc(&p, bytes));
  return p;
}

StatusOr<void*> MallocShared(size_t bytes) {
  void* p = nullptr;
#if QR_PLATFORM_CUDA
  QR_GPU_RETURN_IF_ERROR(hipMalloc(&p, bytes));
#else
  // Peers poll flags in this buffer: coarse-grained memory would let a
  // waiter see stale lines (vLLM/QuickReduce allocate it the same way).
  QR_GPU_RETURN_IF_ERROR(hipExtMallocWithFlags(&p, bytes, hipDeviceMallocFinegrained));
#endif
  return p;
}

void Free(void* device_ptr) {
  if (device_ptr != nullptr) Warn(hipFree(device_ptr), "hipFree");
}

StatusOr<void*> HostAllocMapped(size_t bytes, void** device_ptr) {
  void* h = nullptr;
  QR_GPU_RETURN_IF_ERROR(hipHostMalloc(&h, bytes, hipHostMallocMapped | hipHostMallocPortable));
  std::memset(h, 0, bytes);
  hipError_t e = hipHostGetDevicePointer(device_ptr, h, 0);
  if (e != hipSuccess) {
    Warn(hipHostFree(h), "hipHostFree");
    QR_GPU_RETURN_IF_ERROR(e);
  }
  return h;
}

void HostFree(void* host_ptr) {
  if (host_ptr != nullptr) Warn(hipHostFree(host_ptr), "hipHostFree");
}

StatusOr<void*> HostRegisterMapped(void* host_ptr, size_t bytes) {
  QR_GPU_RETURN_IF_ERROR(
      hipHostRegister(host_ptr, bytes, hipHostRegisterMapped | hipHostRegisterPortable));
  void* d = nullptr;
  hipError_t e = hipHostGetDevicePointer(&d, host_ptr, 0);
  if (e != hipSuccess) {
    Warn(hipHostUnregister(host_ptr), "hipHostUnregister");
    QR_GPU_RETURN_IF_ERROR(e);
  }
  return d;
}

void HostUnregister(void* host_ptr) {
  if (host_ptr != nullptr) Warn(hipHostUnregister(host_ptr), "hipHostUnregister");
}

StatusOr<IpcHandle> IpcGetHandle(void* device_ptr) {
  static_assert(sizeof(hipIpcMemHandle_t) == kIpcHandleBytes, "IPC handle size");
  hipIpcMemHandle_t h;
  QR_GPU_RETURN_IF_ERROR(hipIpcGetMemHandle(&h, device_ptr));
  IpcHandle out;
  std::memcpy(out.data(), &h, kIpcHandleBytes);
  return out;
}

StatusOr<void*> IpcOpenHandle(const IpcHandle& handle) {
  hipIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), kIpcHandleBytes);
  void* p = nullptr;
  hipError_t e = hipIpcOpenMemHandle(&p, h, hipIpcMemLazyEnablePeerAccess);
  if (e != hipSuccess) {
    (void)hipGetLastError();
    return UnavailableError(std::string("cannot open a peer's GPU IPC handle: ") +
                            hipGetErrorString(e));
  }
  return p;
}

void IpcCloseHandle(void* device_ptr) {
  if (device_ptr != nullptr) Warn(hipIpcCloseMemHandle(device_ptr), "hipIpcCloseMemHandle");
}

// hipMemcpy from pageable memory may return before the DMA lands, and
// hipMemset is asynchronous; kernels on non-blocking streams are not ordered
// after either. Waiting for the legacy default stream (not for other
// streams, which may hold a waiting kernel) makes both complete on return.
Status Memcpy(void* dst, const void* src, size_t bytes) {
  QR_GPU_RETURN_IF_ERROR(hipMemcpy(dst, src, bytes, hipMemcpyDefault));
  QR_GPU_RETURN_IF_ERROR(hipStreamSynchronize(nullptr));
  return OkStatus();
}

Status Memset(void* dst, int value, size_t bytes) {
  QR_GPU_RETURN_IF_ERROR(hipMemset(dst, value, bytes));
  QR_GPU_RETURN_IF_ERROR(hipStreamSynchronize(nullptr));
  return OkStatus();
}

Status MemcpyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, S(stream)));
  return OkStatus();
}

Status MemsetAsync(void* dst, int value, size_t bytes, Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipMemsetAsync(dst, value, bytes, S(stream)));
  return OkStatus();
}

StatusOr<Stream> StreamCreate() {
  hipStream_t s = nullptr;
  QR_GPU_RETURN_IF_ERROR(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  return static_cast<Stream>(s);
}

void StreamDestroy(Stream stream) {
  if (stream != nullptr) Warn(hipStreamDestroy(S(stream)), "hipStreamDestroy");
}

Status StreamSynchronize(Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipStreamSynchronize(S(stream)));
  return OkStatus();
}

StatusOr<bool> StreamDone(Stream stream) {
  hipError_t e = hipStreamQuery(S(stream));
  if (e == hipSuccess) return true;
  if (e == hipErrorNotReady) {
    (void)hipGetLastError();
    return false;
  }
  QR_GPU_RETURN_IF_ERROR(e);
  return false;
}

StatusOr<bool> StreamIsCapturing(Stream stream) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  QR_GPU_RETURN_IF_ERROR(hipStreamIsCapturing(S(stream), &st));
  return st == hipStreamCaptureStatusActive;
}

Status DeviceSynchronize() {
  QR_GPU_RETURN_IF_ERROR(hipDeviceSynchronize());
  return OkStatus();
}

Status BeginCapture(Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipStreamBeginCapture(S(stream), hipStreamCaptureModeGlobal));
  return OkStatus();
}

Status BeginCaptureThreadLocal(Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipStreamBeginCapture(S(stream), hipStreamCaptureModeThreadLocal));
  return OkStatus();
}

StatusOr<GraphExec> EndCapture(Stream stream, size_t* node_count) {
  hipGraph_t g = nullptr;
  QR_GPU_RETURN_IF_ERROR(hipStreamEndCapture(S(stream), &g));
  if (node_count != nullptr) {
    *node_count = 0;
    const hipError_t n = hipGraphGetNodes(g, nullptr, node_count);
    if (n != hipSuccess) {
      Warn(hipGraphDestroy(g), "hipGraphDestroy");
      QR_GPU_RETURN_IF_ERROR(n);
    }
  }
  hipGraphExec_t ge = nullptr;
  hipError_t e = hipGraphInstantiate(&ge, g, nullptr, nullptr, 0);
  Warn(hipGraphDestroy(g), "hipGraphDestroy");
  QR_GPU_RETURN_IF_ERROR(e);
  return static_cast<GraphExec>(ge);
}

Status GraphLaunch(GraphExec graph, Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipGraphLaunch(static_cast<hipGraphExec_t>(graph), S(stream)));
  return OkStatus();
}

void GraphDestroy(GraphExec graph) {
  if (graph != nullptr) {
    Warn(hipGraphExecDestroy(static_cast<hipGraphExec_t>(graph)), "hipGraphExecDestroy");
  }
}

StatusOr<Event> EventCreate() {
  hipEvent_t e = nullptr;
  QR_GPU_RETURN_IF_ERROR(hipEventCreate(&e));
  return static_cast<Event>(e);
}

Status EventRecord(Event event, Stream stream) {
  QR_GPU_RETURN_IF_ERROR(hipEventRecord(static_cast<hipEvent_t>(event), S(stream)));
  return OkStatus();
}

Status EventSynchronize(Event event) {
  QR_GPU_RETURN_IF_ERROR(hipEventSynchronize(static_cast<hipEvent_t>(event)));
  return OkStatus();
}

StatusOr<float> EventElapsedMs(Event start, Event stop) {
  float ms = 0;
  QR_GPU_RETURN_IF_ERROR(
      hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start), static_cast<hipEvent_t>(stop)));
  return ms;
}

void EventDestroy(Event event) {
  if (event != nullptr) Warn(hipEventDestroy(static_cast<hipEvent_t>(event)), "hipEventDestroy");
}

Status LastError(const char* what) {
  hipError_t e = hipGetLastError();
  if (e == hipSuccess) return OkStatus();
  return InternalError(std::string(what) + ": " + hipGetErrorString(e));
}

}  // namespace qr::gpu
