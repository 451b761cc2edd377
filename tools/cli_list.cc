#include "tools/cli_list.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "common/limits.h"
#include "common/status_macros.h"

namespace qr::tools {

void UseToolDefaults(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.option_defaults()->disable_flag_override();
}

std::vector<std::string> SplitCommaList(std::string_view text) {
  std::vector<std::string> items;
  while (true) {
    const size_t comma = text.find(',');
    items.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) return items;
    text.remove_prefix(comma + 1);
  }
}

StatusOr<int> ParseIntIn(const std::string& text, int lo, int hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    return InvalidArgumentError(fmt::format("'{}' is not an integer in {}..{}", text, lo, hi));
  }
  return static_cast<int>(v);
}

StatusOr<int> ParseWorldSize(const std::string& text) {
  QR_ASSIGN_OR_RETURN(int ws, ParseIntIn(text, 2, 8));
  QR_RETURN_IF_ERROR(ValidateWorldSize(ws));
  return ws;
}

Status ParseCli(CLI::App& app, const std::vector<std::string>& args, bool* help) {
  *help = false;
  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  // CLI11 reports by exception; none leaves this function.
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    *help = true;
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  return OkStatus();
}

}  // namespace qr::tools
