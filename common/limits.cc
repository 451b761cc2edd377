#include "common/limits.h"

#include <string>

namespace qr {

Status ValidateWorldSize(int world_size) {
  if (IsSupportedWorldSize(world_size)) return OkStatus();
  return InvalidArgumentError("world size must be 2, 4 or 8, got " + std::to_string(world_size));
}

}  // namespace qr
