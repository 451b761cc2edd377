#include "tools/qr_demo_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <optional>

#include "comm/policy.h"
#include "common/bytes.h"
#include "common/env_vars.h"
#include "kernels/platform/platform.h"
#include "kernels/types.h"

namespace qr::demo {

std::string ResultTable(const std::vector<DemoRow>& rows, const Config& config, int world_size,
                        bool on_gpu) {
  std::string text = fmt::format("\n{:<6} {:<5} {:>10}  {:<9} {:>11}  {:>9}  {:<9} {:>11}  {:>8}\n",
                                 "regime", "dtype", "size", "algorithm", "max |err|", "err/bound",
                                 "reference", "us/call", "GB/s");
  for (const DemoRow& r : rows) {
    text += fmt::format("{:<6} {:<5} {:>10}  {:<9} {:11.4g}  {:9.3f}  {:<9} {:11.1f}  {:8.3f}\n",
                        r.regime, r.dtype, r.size, r.algorithm, r.max_error, r.ratio,
                        r.exact ? "bit-exact" : "DIFFERS", r.us_per_call, r.gbps);
  }
  const uint64_t one_shot_max = OneShotCeilingBytes(config, world_size);
  if (one_shot_max > 0) {
    text += fmt::format(
        "\nalgorithm: calls up to {} run one-shot (exact 16-bit values, the regime's codec\n"
        "unused), larger ones two-shot with the regime's codec. The ceiling is {}.\n",
        FormatBytes(one_shot_max),
        config.one_shot_max_bytes.has_value() ? "QR_ONE_SHOT_MAX_KB's"
                                              : "built in;\nQR_ONE_SHOT_MAX_KB overrides it");
  } else {
    text += "\nalgorithm: two-shot only (QR_ONE_SHOT_MAX_KB=0).\n";
  }
  text += fmt::format(
      "err/bound: largest |output - exact sum| / proven bound over all elements "
      "(must be <= 1).\nus/call and GB/s (message bytes / time, eager calls): rank 0, "
      "{} backend, {} processes, {} CPU cores.\n",
      on_gpu ? "GPU" : "host", world_size, ::sysconf(_SC_NPROCESSORS_ONLN));
  return text;
}

// The sizes straddle the AMD table's fp16 and bf16 floors at world size 2.
std::string PolicyText(const qr_comm* comm, const Config& config, int world_size) {
  const std::optional<EnvValue> regime_var = kEnvQuantization.Lookup();
  const std::string regime_source = regime_var
                                        ? fmt::format("{}={}", regime_var->name, regime_var->value)
                                        : std::string("QR_QUANTIZATION unset: the default");
  const std::string table =
      fmt::format("the built-in {} min-size table", PlatformName(config.platform));
  std::string floor_source = table;
  if (config.min_size_bytes_override.has_value()) {
    floor_source = "QR_MIN_SIZE_BYTES_MB";
  } else if (config.min_size_table.has_value()) {
    floor_source = fmt::format("QR_MIN_SIZE_TABLE ({} where it has no row)", table);
  }
  std::string text = fmt::format(
      "\npolicy: qr_all_reduce runs {} ({}), bf16 {};\nfloors from {}. "
      "qr_should_all_reduce at world size {}:\n       ",
      RegimeName(config.regime), regime_source,
      config.cast_bf16_to_fp16 ? "through fp16" : "natively", floor_source, world_size);
  const uint64_t sizes[] = {16 << 10, 256 << 10, 1 << 20, 2 << 20, 16 << 20};
  for (uint64_t bytes : sizes) text += fmt::format(" {:>8}", FormatBytes(bytes));
  text += "\n";
  for (const qr_dtype dtype : {QR_FLOAT16, QR_BFLOAT16}) {
    text += fmt::format("  {:<5}", dtype == QR_FLOAT16 ? "fp16" : "bf16");
    for (uint64_t bytes : sizes) {
      text += fmt::format(" {:>8}", qr_should_all_reduce(comm, bytes, dtype) ? "yes" : "no");
    }
    text += "\n";
  }
  return text;
}

}  // namespace qr::demo
