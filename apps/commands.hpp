// Each subcommand lives in its own cmd_<name>.cpp and registers itself here; main() builds the
// CLI from the registry. Subcommands only parse arguments and call into the libraries.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace tlb {
struct RunOptions;
}

namespace tlb::cli {

// Exit codes (docs/design.md §7).
enum ExitCode : int { kOk = 0, kGateOrAccuracyFailure = 1, kUsageOrConfig = 2, kDevice = 3 };

// Adds a subcommand to `root` and arranges for its callback to store its exit code in `rc`.
using CommandSetup = std::function<void(CLI::App& root, int& rc)>;

// `order` fixes the order of subcommands in --help.
bool register_command(int order, CommandSetup setup);

// A seed as typed: a decimal integer in 0 .. 2^64-1, else ConfigError naming `option`. (CLI11
// would wrap -1 to 2^64-1 and clamp a 23-digit number.)
uint64_t parse_seed(const std::string& text, const char* option = "--seed");

// run's timing options (--min-reps, --max-reps, --point-budget-ms, --blocks), into `o`.
void add_timing_options(CLI::App& cmd, RunOptions& o);
// What resolve_defaults cannot see: a count or budget given as 0 or below, which it would read
// as "the mode's default". ConfigError naming the option.
void check_timing_options(const CLI::App& cmd, const RunOptions& o);

}  // namespace tlb::cli
