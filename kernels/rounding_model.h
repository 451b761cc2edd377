// The rounding model the error bounds are built on (docs/codecs.md): fp32's
// unit roundoff, and what rounding one value to a 16-bit format can cost,
// |rn(y) - y| <= rel * |y| + abs (abs = half the subnormal spacing), below
// `max` (saturation is the caller's). One owner for kernels/error_bound.cc
// and kernels/collective_error_bound.cc.
#ifndef QR_KERNELS_ROUNDING_MODEL_H_
#define QR_KERNELS_ROUNDING_MODEL_H_

#include "kernels/types.h"

namespace qr::kernels::rounding {

inline constexpr double kU32 = 0x1p-24;

struct Format {
  double rel;
  double abs;
  double max;
};
inline constexpr Format kFp16Format{0x1p-11, 0x1p-25, 65504.0};
inline constexpr Format kBf16Format{0x1p-8, 0x1p-134, 3.3895313892515355e38};

constexpr const Format& FormatOf(DType dtype) {
  return dtype == DType::kFloat16 ? kFp16Format : kBf16Format;
}

}  // namespace qr::kernels::rounding

#endif  // QR_KERNELS_ROUNDING_MODEL_H_
