// Device copies of host word arrays for the test-only kernel launchers
// (packed_codec_kernels.cu, packed_cast_kernels.cu).
#ifndef QR_TESTS_GPU_DEVICE_WORDS_H_
#define QR_TESTS_GPU_DEVICE_WORDS_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "common/status_macros.h"
#include "kernels/platform/gpu_api.h"

namespace qr::testing {

// n words on the current GPU, holding host[0..n) (uninitialised if host is
// nullptr).
inline StatusOr<gpu::DeviceBuffer> UploadWords(const uint32_t* host, size_t n) {
  QR_ASSIGN_OR_RETURN(gpu::DeviceBuffer words, gpu::DeviceBuffer::Malloc(n * sizeof(uint32_t)));
  if (host != nullptr) QR_RETURN_IF_ERROR(gpu::Memcpy(words.get(), host, words.bytes()));
  return words;
}

}  // namespace qr::testing

#endif  // QR_TESTS_GPU_DEVICE_WORDS_H_
