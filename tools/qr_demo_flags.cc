#include "tools/qr_demo_flags.h"

#include <fmt/format.h>

#include <optional>

#include "CLI/CLI.hpp"
#include "common/bytes.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "tools/cli_list.h"

namespace qr::demo {
namespace {

StatusOr<std::string> ParseDevice(const std::string& text) {
  if (text == "auto" || text == "host" || text == "gpu") return text;
  return InvalidArgumentError(fmt::format("'{}' is not one of auto, host, gpu", text));
}

StatusOr<uint64_t> ParseSize(const std::string& text) {
  const StatusOr<uint64_t> b = ParseBytes(text);
  if (!b.ok() || *b == 0 || !IsWholeMessageUnits(*b)) {
    return InvalidArgumentError(
        fmt::format("size '{}' is not a positive multiple of 16 bytes", text));
  }
  return *b;
}

StatusOr<Codec> ParseRegime(const std::string& text) {
  const std::optional<Codec> c = CodecFromName(text);
  if (!c) {
    return InvalidArgumentError(
        fmt::format("regime '{}' is not one of FP, INT8, INT6, INT4, INT3", text));
  }
  return *c;
}

StatusOr<DType> ParseDType(const std::string& text) {
  if (text == "fp16") return DType::kFloat16;
  if (text == "bf16") return DType::kBFloat16;
  return InvalidArgumentError(fmt::format("dtype '{}' is not fp16 or bf16", text));
}

void DefineFlags(CLI::App& app, DemoFlags& f) {
  tools::UseToolDefaults(app);
  tools::AddParsedOption<int>(app, "--world-size", f.world_size, tools::ParseWorldSize,
                              "worker processes, 2, 4 or 8 (default 2)")
      ->type_name("N");
  tools::AddParsedOption<std::string>(app, "--device", f.device, ParseDevice,
                                      "auto, host or gpu (default auto: gpu if there are enough)")
      ->type_name("DEVICE");
  tools::AddListOption<uint64_t>(app, "--sizes", f.sizes, ParseSize,
                                 "message bytes, multiples of 16 (default 16,49168,1M,8M)");
  tools::AddListOption<Codec>(app, "--regimes", f.regimes, ParseRegime,
                              "FP,INT8,INT6,INT4,INT3 (default: all the world size allows)");
  tools::AddListOption<DType>(app, "--dtypes", f.dtypes, ParseDType, "fp16,bf16 (default both)");
  app.add_option("--group", f.group, "group name (default qr-demo-<pid>)")->type_name("NAME");
  // Internal, so not in --help: the launcher's workers.
  tools::AddParsedOption<int>(
      app, "--worker-rank", f.worker_rank,
      [](const std::string& text) { return tools::ParseIntIn(text, 0, 7); }, "")
      ->group("");
  app.footer(
      "Runs all-reduces across --world-size worker processes in every regime\n"
      "and dtype, checks them, and prints a table, then what qr_should_all_reduce\n"
      "says under this environment. Honours QR_BROKER_SOCKET, QR_BROKER_AUTOSTART,\n"
      "QR_CAST_BF16_TO_FP16, QR_ONE_SHOT_MAX_KB, QR_OP_TIMEOUT_MS, QR_LOG_LEVEL,\n"
      "QR_ALLOW_SHARED_DEVICE and the policy's QR_QUANTIZATION, QR_MIN_SIZE_*,\n"
      "QR_MAX_SIZE_BYTES_MB.\n"
      "exit: 0 every check passed, 1 a check or a worker failed, 2 bad flags or set-up");
}

template <typename T, typename Name>
std::string JoinNames(const std::vector<T>& items, Name name) {
  std::string out;
  for (const T& item : items) out += fmt::format("{}{}", out.empty() ? "" : ",", name(item));
  return out;
}

}  // namespace

StatusOr<DemoFlags> ParseDemoArgs(const std::vector<std::string>& args) {
  CLI::App app{"qr-demo", "qr-demo"};
  DemoFlags f;
  DefineFlags(app, f);
  QR_RETURN_IF_ERROR(tools::ParseCli(app, args, &f.help));
  return f;
}

std::string DemoUsage() {
  CLI::App app{"qr-demo: all-reduce across worker processes, every regime checked and timed",
               "qr-demo"};
  DemoFlags f;
  DefineFlags(app, f);
  return app.help();
}

std::vector<std::string> WorkerArgs(const DemoFlags& f, const std::string& device,
                                    const std::string& group, int rank) {
  std::vector<std::string> args = {
      "--world-size",  std::to_string(f.world_size),
      "--device",      device,
      "--group",       group,
      "--worker-rank", std::to_string(rank),
      "--sizes",       JoinNames(f.sizes, [](uint64_t b) { return std::to_string(b); })};
  if (!f.regimes.empty()) {
    args.insert(args.end(),
                {"--regimes", JoinNames(f.regimes, [](Codec c) { return CodecName(c); })});
  }
  args.insert(args.end(), {"--dtypes", JoinNames(f.dtypes, [](DType d) { return DTypeName(d); })});
  return args;
}

}  // namespace qr::demo
