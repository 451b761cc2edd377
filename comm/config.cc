#include "comm/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/env_vars.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "common/syscall.h"
#include "common/unique_fd.h"

namespace qr {
namespace {

Status TableError(std::string_view source, int line, const std::string& what) {
  return InvalidArgumentError("QR_MIN_SIZE_TABLE: " + std::string(source) + ":" +
                              std::to_string(line) + ": " + what +
                              " (allowed: '<fp16|bf16> ws<2|4|8>' and 5 sizes in MiB for FP, "
                              "INT8, INT6, INT4, INT3)");
}

// The whole file. A directory fails here (EISDIR) rather than reading as an
// empty table.
StatusOr<std::string> ReadFile(const std::string& path) {
  QR_ASSIGN_OR_RETURN(
      int raw, SysCall("open " + path, [&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); }));
  UniqueFd fd(raw);
  std::string text;
  char buf[4096];
  for (;;) {
    QR_ASSIGN_OR_RETURN(
        ssize_t n, SysCall("read " + path, [&] { return ::read(fd.get(), buf, sizeof(buf)); }));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

StatusOr<MinSizeTableMiB> ParseMinSizeTable(std::string_view text, std::string_view source) {
  MinSizeTableMiB table;
  for (auto& by_ws : table) {
    for (auto& row : by_ws) row.fill(-1);
  }
  std::istringstream lines{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::istringstream words(line);
    std::string dtype;
    if (!(words >> dtype) || dtype[0] == '#' || dtype == "FP") continue;
    int d = -1;
    if (dtype == "fp16") d = 0;
    if (dtype == "bf16") d = 1;
    if (d < 0) return TableError(source, number, "unknown dtype '" + dtype + "'");
    std::string ws;
    words >> ws;
    int w = -1;
    if (ws == "ws2") w = 0;
    if (ws == "ws4") w = 1;
    if (ws == "ws8") w = 2;
    if (w < 0) return TableError(source, number, "unknown world size '" + ws + "'");
    if (table[d][w][0] >= 0) return TableError(source, number, "duplicate row " + dtype + " " + ws);
    for (int r = 0; r < 5; ++r) {
      std::string word;
      if (!(words >> word)) return TableError(source, number, "fewer than 5 sizes");
      QR_ASSIGN_OR_RETURN(table[d][w][r], ParseInt("QR_MIN_SIZE_TABLE " + std::string(source) +
                                                       ":" + std::to_string(number),
                                                   word, 0, kMaxMaxSizeMb));
    }
    std::string extra;
    if (words >> extra) return TableError(source, number, "more than 5 sizes");
  }
  return table;
}

const char* RegimeName(Regime regime) {
  switch (regime) {
    case Regime::kFp:
      return "FP";
    case Regime::kInt8:
      return "INT8";
    case Regime::kInt6:
      return "INT6";
    case Regime::kInt4:
      return "INT4";
    case Regime::kInt3:
      return "INT3";
    case Regime::kNone:
      return "NONE";
  }
  return "?";
}

Codec CodecForRegime(Regime regime) {
  QR_CHECK(regime != Regime::kNone && IsValidRegime(static_cast<int>(regime)))
      << "CodecForRegime(" << static_cast<int>(regime) << ")";
  // Regime and Codec share values 0..4.
  return static_cast<Codec>(static_cast<int>(regime));
}

StatusOr<Config> LoadConfigFromEnv(Platform platform) {
  Config config;
  config.platform = platform;
  // The declared choices are the regimes' names in qr_regime order.
  const std::vector<std::string> choices = kEnvQuantization.ChoiceList();
  QR_ASSIGN_OR_RETURN(std::string regime, kEnvQuantization.Choice());
  for (int i = 0; i < static_cast<int>(choices.size()); ++i) {
    if (regime == choices[i]) config.regime = static_cast<Regime>(i);
  }
  QR_ASSIGN_OR_RETURN(config.cast_bf16_to_fp16,
                      kEnvCastBf16ToFp16.Bool(DefaultCastBf16ToFp16(platform)));
  QR_ASSIGN_OR_RETURN(int64_t max_mb, kEnvMaxSizeMb.Int());
  config.max_size_bytes = max_mb * kMiB;
  QR_ASSIGN_OR_RETURN(std::optional<int64_t> min_mb, kEnvMinSizeMb.OptionalInt());
  if (min_mb.has_value()) {
    if (*min_mb > max_mb) {
      const auto which = kEnvMinSizeMb.Lookup();
      return InvalidArgumentError(which->name + "=" + std::to_string(*min_mb) +
                                  " exceeds the maximum size of " + std::to_string(max_mb) +
                                  " MiB (allowed: an integer in [0, " + std::to_string(max_mb) +
                                  "])");
    }
    config.min_size_bytes_override = *min_mb * kMiB;
  }
  QR_ASSIGN_OR_RETURN(std::optional<int64_t> quant_kb, kEnvQuantizationMinSizeKb.OptionalInt());
  if (quant_kb.has_value()) config.quantization_min_size_bytes = *quant_kb * kKiB;
  QR_ASSIGN_OR_RETURN(std::optional<int64_t> one_shot_kb, kEnvOneShotMaxKb.OptionalInt());
  if (one_shot_kb.has_value()) config.one_shot_max_bytes = *one_shot_kb * kKiB;
  QR_ASSIGN_OR_RETURN(config.op_timeout_ms, kEnvOpTimeoutMs.Int());
  QR_ASSIGN_OR_RETURN(config.allow_shared_device, kEnvAllowSharedDevice.Bool());
  if (auto table_path = kEnvMinSizeTable.Lookup()) {
    StatusOr<std::string> text = ReadFile(table_path->value);
    if (!text.ok()) {
      return InvalidArgumentError("QR_MIN_SIZE_TABLE=" + table_path->value + " cannot be read (" +
                                  text.status().message() + ") (allowed: a readable table file)");
    }
    QR_ASSIGN_OR_RETURN(config.min_size_table, ParseMinSizeTable(*text, table_path->value));
  }
  return config;
}

StatusOr<int64_t> JoinTimeoutMs(int timeout_ms) {
  if (timeout_ms > 0) return timeout_ms;
  return kEnvJoinTimeoutMs.Int();
}

}  // namespace qr
