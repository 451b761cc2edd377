// Typed parsing of environment variables, and the type of a declared one.
//
// Every setting quickreduce reads is declared once, as an EnvVar in
// common/env_vars.h (name, vLLM alias, type, built-in default, range, the
// README's text), and read through that declaration, so a bad value is always
// an error that names the variable and what it accepts, never silently
// ignored. The primary name wins over the alias, and errors name the variable
// that supplied the value.
//
//   QR_ASSIGN_OR_RETURN(int64_t ms, kEnvOpTimeoutMs.Int());
//   QR_ASSIGN_OR_RETURN(bool cast, kEnvCastBf16ToFp16.Bool(/*fallback=*/true));
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
  std::string name;  // which of the names was set
  std::string value;
};

// The first of names that is set (an empty value counts as unset).
std::optional<EnvValue> LookupEnv(const EnvNames& names);

// Text parsers; `name` only labels the error. Surrounding spaces are ignored.
// Bool accepts 1/0/true/false/yes/no/on/off in any case.
StatusOr<bool> ParseBool(std::string_view name, std::string_view text);
// Decimal integer within [min, max].
StatusOr<int64_t> ParseInt(std::string_view name, std::string_view text, int64_t min, int64_t max);
// One of `choices`, compared case-insensitively; returns the choice's spelling.
StatusOr<std::string> ParseChoice(std::string_view name, std::string_view text,
                                  const std::vector<std::string>& choices);

// Environment versions: `fallback` when none of the names is set.
StatusOr<bool> EnvBool(const EnvNames& names, bool fallback);
StatusOr<int64_t> EnvInt(const EnvNames& names, int64_t fallback, int64_t min, int64_t max);
// nullopt when unset.
StatusOr<std::optional<int64_t>> EnvOptionalInt(const EnvNames& names, int64_t min, int64_t max);
StatusOr<std::string> EnvChoice(const EnvNames& names, std::string fallback,
                                const std::vector<std::string>& choices);
// The raw string, or fallback.
std::string EnvString(const EnvNames& names, std::string fallback);

enum class EnvType { kBool, kInt, kChoice, kString };

// One declared variable (common/env_vars.h holds them all). Built with the
// Env*Var functions below; the readers parse with the parsers above and fall
// back to the declared default. Readers that need a default the declaration
// cannot hold (one that depends on the platform, say) pass it in.
struct EnvVar {
  std::string_view name;
  std::string_view alias;  // vLLM's name, empty when there is none
  EnvType type = EnvType::kString;
  // The built-in value when unset: `fallback` for kBool (0/1) and kInt,
  // `fallback_text` for kChoice. False where the reader computes it or unset
  // means "absent".
  bool has_fallback = false;
  int64_t fallback = 0;
  std::string_view fallback_text;
  int64_t min = 0;  // kInt: the allowed range
  int64_t max = 0;
  std::string_view choices;  // kChoice: "A,B,C", the spellings returned
  // The README's "default" and "meaning" cells for this variable (Markdown),
  // kept equal to README.md by //common:env_vars_readme_test.
  std::string_view default_doc;
  std::string_view doc;

  EnvNames names() const;
  std::optional<EnvValue> Lookup() const;
  std::vector<std::string> ChoiceList() const;
  // The declared default when unset (a bug without one: aborts).
  StatusOr<bool> Bool() const;
  StatusOr<bool> Bool(bool fallback) const;
  StatusOr<int64_t> Int() const;
  // nullopt when unset.
  StatusOr<std::optional<int64_t>> OptionalInt() const;
  StatusOr<std::string> Choice() const;
  // `fallback` must be one of the choices.
  StatusOr<std::string> Choice(std::string_view fallback) const;
  // The raw value, empty when unset.
  std::string String() const;
};

inline constexpr int64_t kNoEnvFallback = INT64_MIN;

namespace internal {
constexpr EnvVar EnvVarOf(std::string_view name, std::string_view alias, EnvType type,
                          std::string_view default_doc, std::string_view doc) {
  EnvVar v;
  v.name = name;
  v.alias = alias;
  v.type = type;
  v.default_doc = default_doc;
  v.doc = doc;
  return v;
}
}  // namespace internal

// kBool; fallback 0, 1, or kNoEnvFallback where the reader supplies it.
constexpr EnvVar EnvBoolVar(std::string_view name, std::string_view alias, int64_t fallback,
                            std::string_view default_doc, std::string_view doc) {
  EnvVar v = internal::EnvVarOf(name, alias, EnvType::kBool, default_doc, doc);
  v.has_fallback = fallback != kNoEnvFallback;
  v.fallback = v.has_fallback ? fallback : 0;
  return v;
}

// kInt in [min, max]; fallback kNoEnvFallback: unset means absent.
constexpr EnvVar EnvIntVar(std::string_view name, std::string_view alias, int64_t fallback,
                           int64_t min, int64_t max, std::string_view default_doc,
                           std::string_view doc) {
  EnvVar v = internal::EnvVarOf(name, alias, EnvType::kInt, default_doc, doc);
  v.has_fallback = fallback != kNoEnvFallback;
  v.fallback = v.has_fallback ? fallback : 0;
  v.min = min;
  v.max = max;
  return v;
}

// kChoice among comma-separated `choices`, compared case-insensitively.
constexpr EnvVar EnvChoiceVar(std::string_view name, std::string_view alias,
                              std::string_view fallback, std::string_view choices,
                              std::string_view default_doc, std::string_view doc) {
  EnvVar v = internal::EnvVarOf(name, alias, EnvType::kChoice, default_doc, doc);
  v.has_fallback = true;
  v.fallback_text = fallback;
  v.choices = choices;
  return v;
}

// kString: a path or a name, taken as it is.
constexpr EnvVar EnvStringVar(std::string_view name, std::string_view alias,
                              std::string_view default_doc, std::string_view doc) {
  return internal::EnvVarOf(name, alias, EnvType::kString, default_doc, doc);
}

}  // namespace qr

#endif  // QR_COMMON_ENV_H_
