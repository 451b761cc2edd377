// The owners of gpu_api.h over its neutral calls, the same in every flavour
// (in the host-only one every factory fails as the call it wraps does).
#include <cstdio>

#include "common/status_macros.h"
#include "kernels/platform/gpu_api.h"

namespace qr::gpu {
namespace {

// Release paths cannot fail; say what went wrong and carry on.
void Warn(const Status& s, const char* what) {
  if (!s.ok()) std::fprintf(stderr, "quickreduce: %s: %s\n", what, s.ToString().c_str());
}

// Runs release() with `device` current, then restores the previous device.
// Release goes on even when the switch fails: the runtime may still manage.
template <typename F>
void OnDevice(int device, const char* what, F release) {
  auto previous = GetDevice();
  const bool switch_device = previous.ok() && *previous != device;
  if (switch_device) Warn(SetDevice(device), what);
  release();
  if (switch_device) Warn(SetDevice(*previous), what);
}

}  // namespace

namespace internal {

void FreeOn(void* p, int device) {
  OnDevice(device, "freeing device memory", [p] { Free(p); });
}
void HostFreeAny(void* p, int) { HostFree(p); }
void HostUnregisterAny(void* p, int) { HostUnregister(p); }
void IpcCloseOn(void* p, int device) {
  OnDevice(device, "closing a peer mapping", [p] { IpcCloseHandle(p); });
}
void StreamDestroyOn(void* s, int device) {
  OnDevice(device, "destroying a stream", [s] { StreamDestroy(s); });
}
void EventDestroyOn(void* e, int device) {
  OnDevice(device, "destroying an event", [e] { EventDestroy(e); });
}
void GraphDestroyOn(void* g, int device) {
  OnDevice(device, "destroying a graph", [g] { GraphDestroy(g); });
}

}  // namespace internal

StatusOr<DeviceBuffer> DeviceBuffer::Malloc(size_t bytes) {
  QR_ASSIGN_OR_RETURN(const int device, GetDevice());
  QR_ASSIGN_OR_RETURN(void* p, gpu::Malloc(bytes));
  return DeviceBuffer(p, bytes, device);
}

StatusOr<DeviceBuffer> DeviceBuffer::MallocShared(size_t bytes) {
  QR_ASSIGN_OR_RETURN(const int device, GetDevice());
  QR_ASSIGN_OR_RETURN(void* p, gpu::MallocShared(bytes));
  return DeviceBuffer(p, bytes, device);
}

StatusOr<MappedHostBuffer> MappedHostBuffer::Create(size_t bytes) {
  void* device_ptr = nullptr;
  QR_ASSIGN_OR_RETURN(void* host, HostAllocMapped(bytes, &device_ptr));
  return MappedHostBuffer(host, device_ptr);
}

StatusOr<HostRegistration> HostRegistration::Create(void* host_ptr, size_t bytes) {
  QR_ASSIGN_OR_RETURN(void* device_ptr, HostRegisterMapped(host_ptr, bytes));
  return HostRegistration(host_ptr, device_ptr);
}

StatusOr<IpcMapping> IpcMapping::Open(const IpcHandle& handle) {
  QR_ASSIGN_OR_RETURN(const int device, GetDevice());
  QR_ASSIGN_OR_RETURN(void* p, IpcOpenHandle(handle));
  return IpcMapping(p, device);
}

StatusOr<ScopedStream> ScopedStream::Create() {
  QR_ASSIGN_OR_RETURN(const int device, GetDevice());
  QR_ASSIGN_OR_RETURN(Stream s, StreamCreate());
  return ScopedStream(s, device);
}

StatusOr<ScopedEvent> ScopedEvent::Create() {
  QR_ASSIGN_OR_RETURN(const int device, GetDevice());
  QR_ASSIGN_OR_RETURN(Event e, EventCreate());
  return ScopedEvent(e, device);
}

StatusOr<ScopedGraph> ScopedGraph::EndCapture(Stream stream) {
  QR_ASSIGN_OR_RETURN(const int device, GetDevice());
  size_t nodes = 0;
  QR_ASSIGN_OR_RETURN(GraphExec g, gpu::EndCapture(stream, &nodes));
  return ScopedGraph(g, device, nodes);
}

// One GetDevice when `device` is already current: the GPU backend's call path.
StatusOr<ScopedDevice> ScopedDevice::Set(int device) {
  auto previous = GetDevice();
  if (!previous.ok()) {
    // No runtime or no device: SetDevice says so (kUnavailable) where it can.
    Status s = SetDevice(device);
    return s.ok() ? previous.status() : s;
  }
  if (*previous == device) return ScopedDevice(-1);
  QR_RETURN_IF_ERROR(SetDevice(device));
  return ScopedDevice(*previous);
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) Warn(SetDevice(previous_), "restoring the current device");
}

}  // namespace qr::gpu
