// CLI11 options whose value is parsed by a project function returning
// StatusOr, for the tools' flags: one item ("--peer-bytes 64M") or a comma
// list ("--regimes FP,INT4"). A bad value fails CLI11's parse with
// "--flag: <the Status message>"; an empty list item is passed to the parser,
// which rejects it, so "FP," is a typo reported, not a list of one.
//
//   std::vector<Codec> regimes;
//   AddListOption<Codec>(app, "--regimes", regimes, ParseCodecItem, "FP,INT8,...");
#ifndef QR_TOOLS_CLI_LIST_H_
#define QR_TOOLS_CLI_LIST_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/status.h"

namespace qr::tools {

// The tools' common parse rules; call before adding options: a flag given
// twice takes its last value (as flags did before CLI11), and a switch takes
// no value ("--no-nccl=1" is an error, not a spelling of --no-nccl).
void UseToolDefaults(CLI::App& app);

// "a,,b" -> {"a", "", "b"}; "" -> {""}.
std::vector<std::string> SplitCommaList(std::string_view text);

// A decimal integer in lo..hi: "'x' is not an integer in lo..hi" otherwise.
[[nodiscard]] StatusOr<int> ParseIntIn(const std::string& text, int lo, int hi);

// --world-size: an integer that ValidateWorldSize (common/limits.h) accepts (2, 4 or 8).
[[nodiscard]] StatusOr<int> ParseWorldSize(const std::string& text);

template <typename T>
using ItemParser = std::function<StatusOr<T>(const std::string&)>;

// `out` is set from the last occurrence of the flag; untouched if absent.
template <typename T>
CLI::Option* AddParsedOption(CLI::App& app, const std::string& name, T& out, ItemParser<T> parse,
                             const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      name, [&out, parse](const std::string& text) { out = *parse(text); }, help);
  opt->check(CLI::Validator(
      [parse](std::string& text) -> std::string {
        const StatusOr<T> v = parse(text);
        return v.ok() ? std::string() : v.status().message();
      },
      ""));
  return opt;
}

// `out` holds every item of the last occurrence, in order, duplicates kept.
template <typename T>
CLI::Option* AddListOption(CLI::App& app, const std::string& name, std::vector<T>& out,
                           ItemParser<T> parse, const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      name,
      [&out, parse](const std::string& text) {
        out.clear();
        for (const std::string& item : SplitCommaList(text)) out.push_back(*parse(item));
      },
      help);
  opt->check(CLI::Validator(
      [parse](std::string& text) -> std::string {
        for (const std::string& item : SplitCommaList(text)) {
          const StatusOr<T> v = parse(item);
          if (!v.ok()) return v.status().message();
        }
        return std::string();
      },
      ""));
  opt->type_name("LIST");
  return opt;
}

// Runs app.parse over args (argv[1..]). Ok, or kInvalidArgument with
// CLI11's message ("--sizes: '3' must be ..."); *help says whether --help
// was asked for (then the flags are left half-parsed: the caller prints help).
[[nodiscard]] Status ParseCli(CLI::App& app, const std::vector<std::string>& args, bool* help);

}  // namespace qr::tools

#endif  // QR_TOOLS_CLI_LIST_H_
