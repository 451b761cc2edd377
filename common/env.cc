#include "common/env.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>

#include "common/status_macros.h"

namespace qr {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

}  // namespace

std::optional<EnvValue> LookupEnv(const EnvNames& names) {
  for (std::string_view name : names) {
    const char* v = std::getenv(std::string(name).c_str());
    if (v != nullptr && *v != '\0') return EnvValue{std::string(name), v};
  }
  return std::nullopt;
}

StatusOr<bool> ParseBool(std::string_view name, std::string_view text) {
  std::string_view t = Trim(text);
  for (const char* yes : {"1", "true", "yes", "on"}) {
    if (EqualsIgnoreCase(t, yes)) return true;
  }
  for (const char* no : {"0", "false", "no", "off"}) {
    if (EqualsIgnoreCase(t, no)) return false;
  }
  return InvalidArgumentError(std::string(name) + "='" + std::string(text) +
                              "' is not a boolean; use 1/0/true/false/yes/no/on/off");
}

StatusOr<int64_t> ParseInt(std::string_view name, std::string_view text, int64_t min, int64_t max) {
  std::string t(Trim(text));
  const std::string range =
      " (allowed: an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "])";
  if (t.empty()) return InvalidArgumentError(std::string(name) + " is empty" + range);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno == ERANGE || end != t.c_str() + t.size()) {
    return InvalidArgumentError(std::string(name) + "='" + std::string(text) +
                                "' is not an integer" + range);
  }
  if (v < min || v > max) {
    return InvalidArgumentError(std::string(name) + "=" + t + " is out of range" + range);
  }
  return static_cast<int64_t>(v);
}

StatusOr<std::string> ParseChoice(std::string_view name, std::string_view text,
                                  const std::vector<std::string>& choices) {
  std::string_view t = Trim(text);
  for (const auto& c : choices) {
    if (EqualsIgnoreCase(t, c)) return c;
  }
  return InvalidArgumentError(std::string(name) + "='" + std::string(text) +
                              "' is not valid (allowed: " + Join(choices) + ")");
}

StatusOr<bool> EnvBool(const EnvNames& names, bool fallback) {
  auto v = LookupEnv(names);
  if (!v) return fallback;
  return ParseBool(v->name, v->value);
}

StatusOr<int64_t> EnvInt(const EnvNames& names, int64_t fallback, int64_t min, int64_t max) {
  auto v = LookupEnv(names);
  if (!v) return fallback;
  return ParseInt(v->name, v->value, min, max);
}

StatusOr<std::optional<int64_t>> EnvOptionalInt(const EnvNames& names, int64_t min, int64_t max) {
  auto v = LookupEnv(names);
  if (!v) return std::optional<int64_t>();
  auto parsed = ParseInt(v->name, v->value, min, max);
  if (!parsed.ok()) return parsed.status();
  return std::optional<int64_t>(*parsed);
}

StatusOr<std::string> EnvChoice(const EnvNames& names, std::string fallback,
                                const std::vector<std::string>& choices) {
  auto v = LookupEnv(names);
  if (!v) return fallback;
  return ParseChoice(v->name, v->value, choices);
}

std::string EnvString(const EnvNames& names, std::string fallback) {
  auto v = LookupEnv(names);
  return v ? v->value : std::move(fallback);
}

EnvNames EnvVar::names() const {
  if (alias.empty()) return {name};
  return {name, alias};
}

std::optional<EnvValue> EnvVar::Lookup() const { return LookupEnv(names()); }

std::vector<std::string> EnvVar::ChoiceList() const {
  std::vector<std::string> out;
  std::string_view rest = choices;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

StatusOr<bool> EnvVar::Bool() const {
  QR_CHECK(type == EnvType::kBool && has_fallback) << name << " has no declared boolean default";
  return Bool(fallback != 0);
}

StatusOr<bool> EnvVar::Bool(bool fallback_value) const {
  QR_CHECK(type == EnvType::kBool) << name << " is not declared boolean";
  return EnvBool(names(), fallback_value);
}

StatusOr<int64_t> EnvVar::Int() const {
  QR_CHECK(type == EnvType::kInt && has_fallback) << name << " has no declared integer default";
  return EnvInt(names(), fallback, min, max);
}

StatusOr<std::optional<int64_t>> EnvVar::OptionalInt() const {
  QR_CHECK(type == EnvType::kInt) << name << " is not declared integer";
  return EnvOptionalInt(names(), min, max);
}

StatusOr<std::string> EnvVar::Choice() const { return Choice(fallback_text); }

StatusOr<std::string> EnvVar::Choice(std::string_view fallback_value) const {
  QR_CHECK(type == EnvType::kChoice) << name << " is not declared a choice";
  return EnvChoice(names(), std::string(fallback_value), ChoiceList());
}

std::string EnvVar::String() const { return EnvString(names(), ""); }

}  // namespace qr
