// Host-side GPU runtime calls with neutral names and no HIP/CUDA types, so
// that g++-compiled code (comm/, tests, tools) can drive the GPU without
// including vendor headers. Implemented in gpu_api.cu (compiled by nvcc or
// hip-clang through gpu_library), and in the host-only flavour by
// gpu_api_host.cc (no devices: DeviceCount() is 0, the rest kUnavailable). Every function acts on
// the calling thread's current device unless it takes a device ordinal. Thread-safe as far as the
// underlying runtime is. Errors: kInternal with the runtime's message unless
// noted; kUnavailable when no GPU/driver is present.
//
// The second half declares move-only owners of what the first half creates
// (gpu_api_raii.cc, the same in every flavour): DeviceBuffer, MappedHostBuffer,
// HostRegistration, IpcMapping, ScopedStream, ScopedEvent, ScopedGraph, and
// ScopedDevice, which restores the previous current device. Each remembers
// the device it was created on and releases there; release never fails (it
// logs). Owners of device objects are not thread-safe; use one from one
// thread at a time.
//
//   QR_ASSIGN_OR_RETURN(gpu::ScopedDevice on, gpu::ScopedDevice::Set(device));
//   QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer buf, gpu::DeviceBuffer::Malloc(bytes));
//   QR_ASSIGN_OR_RETURN(gpu::ScopedStream stream, gpu::ScopedStream::Create());
//   QR_RETURN_IF_ERROR(gpu::MemsetAsync(buf.get(), 0, bytes, stream.get()));
#ifndef QR_KERNELS_PLATFORM_GPU_API_H_
#define QR_KERNELS_PLATFORM_GPU_API_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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
// *node_count (when given) is the captured graph's node count before
// instantiation: 0 means nothing was captured.
[[nodiscard]] StatusOr<GraphExec> EndCapture(Stream stream, size_t* node_count = nullptr);
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

// ---------------------------------------------------------------------------
// Owners.

namespace internal {

// Move-only ownership of one runtime object created on `device`:
// kRelease(object, device) runs exactly once, when the last owner goes (a
// moved-from owner holds nothing). The owners below are this with a name.
template <void (*kRelease)(void*, int)>
class Owned {
 public:
  Owned() = default;
  Owned(void* object, int device) : object_(object), device_(device) {}
  Owned(Owned&& other) noexcept
      : object_(std::exchange(other.object_, nullptr)), device_(other.device_) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      Reset();
      object_ = std::exchange(other.object_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { Reset(); }

  void* get() const { return object_; }
  int device() const { return device_; }
  // Releases the object now (no-op when empty).
  void Reset() {
    if (object_ != nullptr) kRelease(std::exchange(object_, nullptr), device_);
  }

 private:
  void* object_ = nullptr;
  int device_ = -1;
};

void FreeOn(void* device_ptr, int device);
void HostFreeAny(void* host_ptr, int device);
void HostUnregisterAny(void* host_ptr, int device);
void IpcCloseOn(void* device_ptr, int device);
void StreamDestroyOn(void* stream, int device);
void EventDestroyOn(void* event, int device);
void GraphDestroyOn(void* graph, int device);

}  // namespace internal

// Device memory of the current device (Malloc / MallocShared above), freed
// on that device by the destructor. Empty when default-constructed or moved
// from.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  [[nodiscard]] static StatusOr<DeviceBuffer> Malloc(size_t bytes);
  [[nodiscard]] static StatusOr<DeviceBuffer> MallocShared(size_t bytes);

  void* get() const { return memory_.get(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(memory_.get());
  }
  size_t bytes() const { return memory_.get() != nullptr ? bytes_ : 0; }
  int device() const { return memory_.device(); }

 private:
  DeviceBuffer(void* p, size_t bytes, int device) : memory_(p, device), bytes_(bytes) {}
  internal::Owned<internal::FreeOn> memory_;
  size_t bytes_ = 0;
};

// Zeroed pinned host memory mapped into the device (HostAllocMapped): the
// host reads and writes host(), kernels device().
class MappedHostBuffer {
 public:
  MappedHostBuffer() = default;
  [[nodiscard]] static StatusOr<MappedHostBuffer> Create(size_t bytes);

  void* host() const { return memory_.get(); }
  void* device() const { return memory_.get() != nullptr ? device_ptr_ : nullptr; }

 private:
  MappedHostBuffer(void* host, void* device_ptr) : memory_(host, -1), device_ptr_(device_ptr) {}
  internal::Owned<internal::HostFreeAny> memory_;
  void* device_ptr_ = nullptr;
};

// Existing page-aligned host memory (e.g. a shm page) mapped into the device
// (HostRegisterMapped) until the destructor unregisters it; the memory itself
// stays the caller's and must outlive this.
class HostRegistration {
 public:
  HostRegistration() = default;
  [[nodiscard]] static StatusOr<HostRegistration> Create(void* host_ptr, size_t bytes);

  void* device() const { return host_.get() != nullptr ? device_ptr_ : nullptr; }

 private:
  HostRegistration(void* host, void* device_ptr) : host_(host, -1), device_ptr_(device_ptr) {}
  internal::Owned<internal::HostUnregisterAny> host_;
  void* device_ptr_ = nullptr;
};

// A peer's allocation opened in this process (IpcOpenHandle) on the current
// device, closed there by the destructor. kUnavailable as IpcOpenHandle.
class IpcMapping {
 public:
  IpcMapping() = default;
  [[nodiscard]] static StatusOr<IpcMapping> Open(const IpcHandle& handle);

  void* get() const { return mapping_.get(); }

 private:
  IpcMapping(void* p, int device) : mapping_(p, device) {}
  internal::Owned<internal::IpcCloseOn> mapping_;
};

// A non-blocking stream of the current device (StreamCreate).
class ScopedStream {
 public:
  ScopedStream() = default;
  [[nodiscard]] static StatusOr<ScopedStream> Create();

  Stream get() const { return stream_.get(); }
  int device() const { return stream_.device(); }

 private:
  ScopedStream(Stream s, int device) : stream_(s, device) {}
  internal::Owned<internal::StreamDestroyOn> stream_;
};

// A timing event of the current device (EventCreate).
class ScopedEvent {
 public:
  ScopedEvent() = default;
  [[nodiscard]] static StatusOr<ScopedEvent> Create();

  Event get() const { return event_.get(); }

 private:
  ScopedEvent(Event e, int device) : event_(e, device) {}
  internal::Owned<internal::EventDestroyOn> event_;
};

// An instantiated graph of what was captured on `stream` (EndCapture), on
// the current device.
class ScopedGraph {
 public:
  ScopedGraph() = default;
  [[nodiscard]] static StatusOr<ScopedGraph> EndCapture(Stream stream);

  GraphExec get() const { return graph_.get(); }
  [[nodiscard]] Status Launch(Stream stream) const { return GraphLaunch(graph_.get(), stream); }
  // The nodes the capture recorded (0: an empty graph).
  size_t nodes() const { return nodes_; }

 private:
  ScopedGraph(GraphExec g, int device, size_t nodes) : graph_(g, device), nodes_(nodes) {}
  internal::Owned<internal::GraphDestroyOn> graph_;
  size_t nodes_ = 0;
};

// Makes `device` the calling thread's current device for this object's life
// and then restores the one that was current before (mscclpp's
// CudaDeviceGuard). Errors: as SetDevice / GetDevice (kUnavailable for a
// device that does not exist or without a GPU runtime).
class ScopedDevice {
 public:
  [[nodiscard]] static StatusOr<ScopedDevice> Set(int device);
  ScopedDevice(ScopedDevice&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice();

 private:
  explicit ScopedDevice(int previous) : previous_(previous) {}
  int previous_ = -1;  // -1: nothing to restore (moved from, or already current)
};

}  // namespace qr::gpu

#endif  // QR_KERNELS_PLATFORM_GPU_API_H_
