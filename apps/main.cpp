// tlbench: parses the command line and hands off to the subcommand. Errors become the exit
// codes of docs/design.md §7: 2 for usage and config errors, 3 for device failures.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "common/cuda_check.hpp"
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
