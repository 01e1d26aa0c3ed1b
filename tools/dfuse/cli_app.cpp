#include "dfuse/cli_app.h"

#include <charconv>
#include <map>
#include <optional>
#include <random>
#include <span>

#include "dfuse/cli_bench.h"
#include "dfuse/cli_list.h"
#include "dfuse/cli_verify.h"
#include "dfuse/core/error.h"
#include "dfuse/core/runtime.h"
#include "dfuse/registry/registry.h"

namespace dfuse::cli {

namespace {

constexpr const char* kUsage =
    "usage: dfuse <command> [options]\n"
    "\n"
    "  list [--json]                 the registered kernels, and whether each can run here\n"
    "  verify [--device host|cuda] [--op NAME] [--quick] [--seed N]\n"
    "                                every op bit for bit against its eager chain on fresh random\n"
    "                                data; --quick uses small shapes\n"
    "  bench [--device host|cuda] [--op NAME] [--iters N] [--json FILE] [--quick]\n"
    "                                fused vs eager chain, against the copy bandwidth\n"
    "\n"
    "The device defaults to cuda when the CUDA backend loads, else host.\n";

constexpr int kCasesFailed = 1;
constexpr int kUsageError = 2;

class UsageError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

struct OptionSpec {
  std::string_view name;
  bool takes_value;
};

// "--name value" and "--name" options; anything else is a usage error.
std::map<std::string, std::string, std::less<>> parse_options(std::span<const std::string> args,
                                                              std::span<const OptionSpec> allowed) {
  std::map<std::string, std::string, std::less<>> options;
  for (size_t i = 0; i < args.size(); ++i) {
    const OptionSpec* spec = nullptr;
    for (const auto& candidate : allowed) {
      if (args[i] == candidate.name) spec = &candidate;
    }
    if (!spec) throw UsageError("unexpected argument \"" + args[i] + "\"");
    if (!spec->takes_value) {
      options[args[i]] = "";
    } else if (i + 1 == args.size()) {
      throw UsageError(args[i] + " needs a value");
    } else {
      options[args[i]] = args[i + 1];
      ++i;
    }
  }
  return options;
}

template <typename Int>
Int parse_integer(const std::string& option, const std::string& text, Int minimum) {
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < minimum) {
    throw UsageError(option + " needs an integer >= " + std::to_string(minimum) + ", got \"" + text + "\"");
  }
  return value;
}

std::optional<std::string> find(const std::map<std::string, std::string, std::less<>>& options,
                                std::string_view name) {
  auto it = options.find(name);
  return it == options.end() ? std::nullopt : std::optional<std::string>(it->second);
}

// --device host|cuda, or cuda when its backend loads and the host otherwise. An explicit cuda
// that cannot load is an error; the fallback is reported on `err`.
std::optional<Device> resolve_device(const std::optional<std::string>& requested, std::ostream& err) {
  if (requested && *requested == "host") return Device::host();
  if (requested && *requested != "cuda") {
    throw UsageError("--device must be host or cuda, got \"" + *requested + "\"");
  }
  try {
    runtime(Device::cuda());
    return Device::cuda();
  } catch (const Error& e) {
    if (requested) {
      err << "dfuse: CUDA is unavailable: " << e.what() << "\n";
      return std::nullopt;
    }
    err << "dfuse: CUDA is unavailable (" << e.what() << "); running on the host\n";
    return Device::host();
  }
}

int list_command(std::span<const std::string> args, std::ostream& out) {
  constexpr OptionSpec kAllowed[] = {{"--json", false}};
  const auto options = parse_options(args, kAllowed);
  const auto specs = Registry::global().all();
  out << (options.contains("--json") ? list_json(specs, Platform::detect())
                                     : list_table(specs, Platform::detect()));
  return 0;
}

int verify_command(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  constexpr OptionSpec kAllowed[] = {
      {"--device", true}, {"--op", true}, {"--quick", false}, {"--seed", true}};
  const auto options = parse_options(args, kAllowed);
  const auto device = resolve_device(find(options, "--device"), err);
  if (!device) return kUsageError;
  VerifyOptions verify{.device = *device, .op = find(options, "--op"), .quick = options.contains("--quick")};
  const auto seed = find(options, "--seed");
  verify.seed = seed ? parse_integer<uint64_t>("--seed", *seed, 0) : std::random_device{}();
  if (!verify.quick && !device->is_cuda()) {
    err << "dfuse: model shapes on the host take long; --quick uses small ones\n";
  }
  return run_verify(verify, out, err);
}

int bench_command(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  constexpr OptionSpec kAllowed[] = {
      {"--device", true}, {"--op", true}, {"--iters", true}, {"--json", true}, {"--quick", false}};
  const auto options = parse_options(args, kAllowed);
  const auto device = resolve_device(find(options, "--device"), err);
  if (!device) return kUsageError;
  // The host runs model shapes in hundreds of milliseconds; a GPU in microseconds.
  const int default_iters = device->is_cuda() ? 100 : 10;
  const auto iters = find(options, "--iters");
  BenchOptions bench{.device = *device,
                     .op = find(options, "--op"),
                     .quick = options.contains("--quick"),
                     .iters = iters ? parse_integer<int>("--iters", *iters, 1) : default_iters,
                     .json_path = find(options, "--json")};
  return run_bench(bench, out, err);
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? kUsageError : 0;
  }
  const std::span<const std::string> rest = std::span(args).subspan(1);
  try {
    if (args[0] == "list") return list_command(rest, out);
    if (args[0] == "verify") return verify_command(rest, out, err);
    if (args[0] == "bench") return bench_command(rest, out, err);
    throw UsageError("unknown command \"" + args[0] + "\"");
  } catch (const UsageError& e) {
    err << "dfuse: " << e.what() << "\n\n" << kUsage;
    return kUsageError;
  } catch (const std::exception& e) {
    err << "dfuse " << args[0] << ": " << e.what() << "\n";
    return kUsageError;
  }
}

}  // namespace dfuse::cli
