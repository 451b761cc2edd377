#include "kernels/one_shot_reference.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "kernels/float16.h"

namespace qr::kernels {

Status ValidateOneShotParams(const TwoShotParams& p) {
  QR_RETURN_IF_ERROR(ValidateTwoShotParams(p));
  if (p.num_elems > OneShotMaxElems(p.world_size)) {
    return InvalidArgumentError("one-shot takes at most " +
                                std::to_string(OneShotMaxElems(p.world_size)) +
                                " values at world size " + std::to_string(p.world_size) + ", got " +
                                std::to_string(p.num_elems));
  }
  return OkStatus();
}

uint16_t OneShotWireValue(const TwoShotParams& p, uint16_t input) {
  (void)p;
  const uint16_t v = input == 0xFFFFu ? 0xFFFEu : input;
  return static_cast<uint16_t>(~v);
}

void EncodeOneShot(const TwoShotParams& p, const uint16_t* input, int64_t n, uint16_t* wire) {
  for (int64_t i = 0; i < n; ++i) wire[i] = OneShotWireValue(p, input[i]);
}

void ReduceOneShot(const TwoShotParams& p, const uint16_t* const* received, int64_t n,
                   uint16_t* output) {
  for (int64_t i = 0; i < n; ++i) {
    float acc = ToFloat(p.dtype, static_cast<uint16_t>(~received[0][i]));
    for (int s = 1; s < p.world_size; ++s) {
      acc = acc + ToFloat(p.dtype, static_cast<uint16_t>(~received[s][i]));
    }
    output[i] = FromFloat(p.dtype, acc);
  }
}

Status ReferenceOneShotAllReduce(const TwoShotParams& p, const uint16_t* const* inputs,
                                 uint16_t* const* outputs) {
  QR_RETURN_IF_ERROR(ValidateOneShotParams(p));
  const int ws = p.world_size;
  const size_t n = static_cast<size_t>(p.num_elems);
  // Every receiver gets the same bytes from a source, so one copy per source.
  std::vector<std::vector<uint16_t>> wire(static_cast<size_t>(ws), std::vector<uint16_t>(n));
  for (int s = 0; s < ws; ++s) EncodeOneShot(p, inputs[s], p.num_elems, wire[s].data());
  std::vector<const uint16_t*> received(static_cast<size_t>(ws));
  for (int s = 0; s < ws; ++s) received[s] = wire[s].data();
  for (int r = 0; r < ws; ++r) ReduceOneShot(p, received.data(), p.num_elems, outputs[r]);
  return OkStatus();
}

}  // namespace qr::kernels
