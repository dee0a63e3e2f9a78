// tlbench: parses the command line and hands off to the subcommand. Errors become the exit
// codes of docs/design.md §7: 2 for usage and config errors, 3 for device failures.
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <map>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "common/cuda_check.hpp"
#include "common/launch.hpp"
#include "gemm/gemm.hpp"
#include "config.hpp"
#include "tlbench_version.hpp"

namespace tlb::cli {

namespace {
std::vector<std::pair<int, CommandSetup>>& registry() {
  static std::vector<std::pair<int, CommandSetup>> r;
  return r;
}
}  // namespace

bool register_command(int order, CommandSetup setup) {
  registry().emplace_back(order, std::move(setup));
  return true;
}

uint64_t parse_seed(const std::string& text, const char* option) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE ||
      *end != '\0')
    throw tlb::ConfigError(fmt::format("{} {}: expected an integer in 0 .. 18446744073709551615", option, text));
  return v;
}

namespace {

// An option given an empty value ("--cases ''") would otherwise quietly mean its default.
void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& v) { return v.empty() ? std::string("an empty value; leave the option out for its default") : std::string(); },
      "", "non-empty");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt : sub->get_options([](const CLI::Option* o) { return o->get_type_size() != 0; }))
      opt->check(non_empty);
}

// CLI11 answers a word that names no subcommand with "A subcommand is required".
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == argv[1]) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return fmt::format("unknown subcommand '{}' (one of: {})", argv[1], names);
}

}  // namespace

}  // namespace tlb::cli

int main(int argc, char** argv) {
  using namespace tlb::cli;
  CLI::App app{"tlbench: measures what each hand-written transformer-layer kernel technique buys "
               "against a cuBLAS reference"};
  app.set_version_flag("--version", std::string("tlbench ") + TLBENCH_VERSION + " (git " +
                                        TLBENCH_GIT_COMMIT + ")");
  app.require_subcommand(1);

  int rc = kOk;
  auto& reg = registry();
  std::stable_sort(reg.begin(), reg.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, setup] : reg) setup(app, rc);
  refuse_empty_values(app);
  if (const std::string why = unknown_subcommand(app, argc, argv); !why.empty()) {
    fmt::print(stderr, "tlbench: {}\n", why);
    return kUsageOrConfig;
  }

  // Switches that change how kernels launch or store: refused before any command runs, so
  // nothing is measured or written under a value nobody meant.
  try {
    tlb::check_pdl_setting();
    tlb::gemm_store_mode();
  } catch (const std::exception& e) {
    fmt::print(stderr, "tlbench: {}\n", e.what());
    return kUsageOrConfig;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "tlbench: {}\n", e.what());
    return kUsageOrConfig;
  } catch (const tlb::ConfigError& e) {
    fmt::print(stderr, "tlbench: {}\n", e.what());
    return kUsageOrConfig;
  } catch (const tlb::DeviceError& e) {
    fmt::print(stderr, "tlbench: device failure: {}\n", e.what());
    return kDevice;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tlbench: {}\n", e.what());
    return kUsageOrConfig;
  }
  return rc;
}
