// Host-side GPU runtime calls with neutral names and no HIP/CUDA types, so
// that g++-compiled code (comm/, tests, tools) can drive the GPU without
// including vendor headers. Implemented in gpu_api.cu (compiled by nvcc or
// hip-clang through gpu_library), and in the host-only flavour by
// gpu_api_host.cc (no devices: DeviceCount() is 0, the rest kUnavailable). Every function acts on
// the calling thread's current device unless it takes a device ordinal. Thread-safe as far as the
// underlying runtime is. Errors: kInternal with the runtime's message unless
// noted; kUnavailable when no GPU/driver is present.
#ifndef QR_KERNELS_PLATFORM_GPU_API_H_
#define QR_KERNELS_PLATFORM_GPU_API_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace qr::gpu {

using Stream = void*;     // hipStream_t; nullptr is the legacy default stream
using Event = void*;      // hipEvent_t
using GraphExec = void*;  // hipGraphExec_t

inline constexpr size_t kIpcHandleBytes = 64;
using IpcHandle = std::array<uint8_t, kIpcHandleBytes>;

// Number of visible GPUs; 0 when there is no driver or no device.
int DeviceCount();
[[nodiscard]] Status SetDevice(int device);
[[nodiscard]] StatusOr<int> GetDevice();
// "0000:19:00.0" style, lower case: identifies the physical GPU across processes.
[[nodiscard]] StatusOr<std::string> PciBusId(int device);
[[nodiscard]] StatusOr<int> MultiprocessorCount(int device);
// Rate of the device wall clock that kernels read (ticks per millisecond).
[[nodiscard]] StatusOr<int64_t> WallClockTicksPerMs(int device);
[[nodiscard]] StatusOr<bool> CanAccessPeer(int device, int peer);
// Lets the current device access `peer`'s memory; already enabled is OK.
[[nodiscard]] Status EnablePeerAccess(int peer);

// Device memory. MallocShared is for buffers that peers write and flags that
// peers poll (fine-grained on AMD). Free* log errors and never fail.
[[nodiscard]] StatusOr<void*> Malloc(size_t bytes);
[[nodiscard]] StatusOr<void*> MallocShared(size_t bytes);
void Free(void* device_ptr);

// Pinned host memory mapped into the device: *device_ptr gets its address
// there. The host reads it with plain (volatile/atomic) loads, never blocking.
[[nodiscard]] StatusOr<void*> HostAllocMapped(size_t bytes, void** device_ptr);
void HostFree(void* host_ptr);
// Maps existing page-aligned host memory (e.g. a shm page) into the device;
// returns its device address. Undo with HostUnregister before unmapping it.
[[nodiscard]] StatusOr<void*> HostRegisterMapped(void* host_ptr, size_t bytes);
void HostUnregister(void* host_ptr);

// Inter-process sharing of a whole allocation made by Malloc/MallocShared.
[[nodiscard]] StatusOr<IpcHandle> IpcGetHandle(void* device_ptr);
// kUnavailable when the handle cannot be opened (other process gone, no P2P).
[[nodiscard]] StatusOr<void*> IpcOpenHandle(const IpcHandle& handle);
void IpcCloseHandle(void* device_ptr);

// Copies/memset (any direction, unified addressing) that are complete on
// return, also as seen by kernels on other (non-blocking) streams.
[[nodiscard]] Status Memcpy(void* dst, const void* src, size_t bytes);
[[nodiscard]] Status Memset(void* dst, int value, size_t bytes);
[[nodiscard]] Status MemcpyAsync(void* dst, const void* src, size_t bytes, Stream stream);
[[nodiscard]] Status MemsetAsync(void* dst, int value, size_t bytes, Stream stream);

[[nodiscard]] StatusOr<Stream> StreamCreate();  // non-blocking w.r.t. the default stream
void StreamDestroy(Stream stream);
[[nodiscard]] Status StreamSynchronize(Stream stream);
// True when everything enqueued so far has finished.
[[nodiscard]] StatusOr<bool> StreamDone(Stream stream);
// True while `stream` is being captured into a graph.
[[nodiscard]] StatusOr<bool> StreamIsCapturing(Stream stream);
[[nodiscard]] Status DeviceSynchronize();

// Graph capture of everything enqueued on `stream` between the two calls
// (global capture mode), instantiated for replay.
[[nodiscard]] Status BeginCapture(Stream stream);
// Same, but only this thread's unsafe calls invalidate the capture (for one
// capturing thread per device).
[[nodiscard]] Status BeginCaptureThreadLocal(Stream stream);
[[nodiscard]] StatusOr<GraphExec> EndCapture(Stream stream);
[[nodiscard]] Status GraphLaunch(GraphExec graph, Stream stream);
void GraphDestroy(GraphExec graph);

[[nodiscard]] StatusOr<Event> EventCreate();
[[nodiscard]] Status EventRecord(Event event, Stream stream);
[[nodiscard]] Status EventSynchronize(Event event);
[[nodiscard]] StatusOr<float> EventElapsedMs(Event start, Event stop);
void EventDestroy(Event event);

// The runtime's sticky/last launch error as a Status (clears it where the
// runtime does).
[[nodiscard]] Status LastError(const char* what);

}  // namespace qr::gpu

#endif  // QR_KERNELS_PLATFORM_GPU_API_H_
