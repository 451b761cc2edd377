// gpu_api.h in the host-only flavour (built without a GPU compiler): there is
// no GPU runtime, so there are no devices and every call that needs one
// fails with kUnavailable, as gpu_api.cu's do on a machine without a driver.
// Host programs with optional GPU paths (qr-demo) build and run unchanged.
#include <string>

#include "kernels/platform/gpu_api.h"

namespace qr::gpu {
namespace {

Status NoGpu(const char* what) {
  return UnavailableError(std::string(what) +
                          ": quickreduce was built without GPU support (host-only flavour)");
}

}  // namespace

int DeviceCount() { return 0; }
Status SetDevice(int) { return NoGpu("SetDevice"); }
StatusOr<int> GetDevice() { return NoGpu("GetDevice"); }
StatusOr<std::string> PciBusId(int) { return NoGpu("PciBusId"); }
StatusOr<int> MultiprocessorCount(int) { return NoGpu("MultiprocessorCount"); }
StatusOr<int64_t> WallClockTicksPerMs(int) { return NoGpu("WallClockTicksPerMs"); }
StatusOr<bool> CanAccessPeer(int, int) { return NoGpu("CanAccessPeer"); }
Status EnablePeerAccess(int) { return NoGpu("EnablePeerAccess"); }

StatusOr<void*> Malloc(size_t) { return NoGpu("Malloc"); }
StatusOr<void*> MallocShared(size_t) { return NoGpu("MallocShared"); }
void Free(void*) {}

StatusOr<void*> HostAllocMapped(size_t, void**) { return NoGpu("HostAllocMapped"); }
void HostFree(void*) {}
StatusOr<void*> HostRegisterMapped(void*, size_t) { return NoGpu("HostRegisterMapped"); }
void HostUnregister(void*) {}

StatusOr<IpcHandle> IpcGetHandle(void*) { return NoGpu("IpcGetHandle"); }
StatusOr<void*> IpcOpenHandle(const IpcHandle&) { return NoGpu("IpcOpenHandle"); }
void IpcCloseHandle(void*) {}

Status Memcpy(void*, const void*, size_t) { return NoGpu("Memcpy"); }
Status Memset(void*, int, size_t) { return NoGpu("Memset"); }
Status MemcpyAsync(void*, const void*, size_t, Stream) { return NoGpu("MemcpyAsync"); }
Status MemsetAsync(void*, int, size_t, Stream) { return NoGpu("MemsetAsync"); }

StatusOr<Stream> StreamCreate() { return NoGpu("StreamCreate"); }
void StreamDestroy(Stream) {}
Status StreamSynchronize(Stream) { return NoGpu("StreamSynchronize"); }
StatusOr<bool> StreamDone(Stream) { return NoGpu("StreamDone"); }
StatusOr<bool> StreamIsCapturing(Stream) { return NoGpu("StreamIsCapturing"); }
Status DeviceSynchronize() { return NoGpu("DeviceSynchronize"); }

Status BeginCapture(Stream) { return NoGpu("BeginCapture"); }
Status BeginCaptureThreadLocal(Stream) { return NoGpu("BeginCaptureThreadLocal"); }
StatusOr<GraphExec> EndCapture(Stream, size_t*) { return NoGpu("EndCapture"); }
Status GraphLaunch(GraphExec, Stream) { return NoGpu("GraphLaunch"); }
void GraphDestroy(GraphExec) {}

StatusOr<Event> EventCreate() { return NoGpu("EventCreate"); }
Status EventRecord(Event, Stream) { return NoGpu("EventRecord"); }
Status EventSynchronize(Event) { return NoGpu("EventSynchronize"); }
StatusOr<float> EventElapsedMs(Event, Event) { return NoGpu("EventElapsedMs"); }
void EventDestroy(Event) {}

// No runtime, so no launch ever failed.
Status LastError(const char*) { return OkStatus(); }

}  // namespace qr::gpu
