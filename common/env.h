// Typed parsing of environment variables.
//
// Every setting is read through these helpers, so a bad value is always an
// error that names the variable and what it accepts, never silently ignored.
// A variable may have aliases (vLLM's names): the first one set wins, in the
// order given, and errors name the variable that supplied the value.
//
//   QR_ASSIGN_OR_RETURN(bool cast, EnvBool({"QR_CAST_BF16_TO_FP16",
//                       "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16"}, true));
#ifndef QR_COMMON_ENV_H_
#define QR_COMMON_ENV_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace qr {

// A variable's names: the primary one first, then aliases.
using EnvNames = std::vector<std::string_view>;

struct EnvValue {
  std::string name;   // which of the names was set
  std::string value;
};

// The first of names that is set (an empty value counts as unset).
std::optional<EnvValue> LookupEnv(const EnvNames& names);

// Text parsers; `name` only labels the error. Surrounding spaces are ignored.
// Bool accepts 1/0/true/false/yes/no/on/off in any case.
StatusOr<bool> ParseBool(std::string_view name, std::string_view text);
// Decimal integer within [min, max].
StatusOr<int64_t> ParseInt(std::string_view name, std::string_view text, int64_t min,
                           int64_t max);
// One of `choices`, compared case-insensitively; returns the choice's spelling.
StatusOr<std::string> ParseChoice(std::string_view name, std::string_view text,
                                  const std::vector<std::string>& choices);

// Environment versions: `fallback` when none of the names is set.
StatusOr<bool> EnvBool(const EnvNames& names, bool fallback);
StatusOr<int64_t> EnvInt(const EnvNames& names, int64_t fallback, int64_t min,
                         int64_t max);
// nullopt when unset.
StatusOr<std::optional<int64_t>> EnvOptionalInt(const EnvNames& names, int64_t min,
                                                int64_t max);
StatusOr<std::string> EnvChoice(const EnvNames& names, std::string fallback,
                                const std::vector<std::string>& choices);
// The raw string, or fallback.
std::string EnvString(const EnvNames& names, std::string fallback);

}  // namespace qr

#endif  // QR_COMMON_ENV_H_
