// CreateGpuBackend in the host-only flavour (built without a GPU compiler;
// bazel/gpu.bzl): a GPU device is a valid request this build cannot serve.
#include <memory>
#include <string>

#include "comm/gpu_backend.h"

namespace qr {

StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(int device, int, int, int64_t, int64_t) {
  return UnsupportedError(
      "GPU " + std::to_string(device) +
      ": this quickreduce library was built without GPU support (host-only flavour, no GPU "
      "compiler at build time); join with QR_DEVICE_HOST (-1), or rebuild with the CUDA "
      "toolkit at /usr/local/cuda");
}

}  // namespace qr
