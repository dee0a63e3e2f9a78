// The options that say how long `run` times a point. `plan` takes them too, so that its time
// estimate is that of the run the user is about to start.
#include <fmt/core.h>

#include "commands.hpp"
#include "run_options.hpp"

namespace tlb::cli {

void add_timing_options(CLI::App& cmd, RunOptions& o) {
  cmd.add_option("--min-reps", o.min_reps, "minimum timed pairs per point (default 10; --quick 3)");
  cmd.add_option("--max-reps", o.max_reps, "maximum timed pairs per point (default 2000; --quick 200)");
  cmd.add_option("--point-budget-ms", o.point_budget_ms,
                 "wall time per point for warm-up and timing (default 100; --quick 25)");
  cmd.add_option("--blocks", o.blocks,
                 "time each point in this many blocks apart in time, its interval built from the spread "
                 "between them as well as within (default 2; --quick 1)");
}

void check_timing_options(const CLI::App& cmd, const RunOptions& o) {
  auto given = [&](const char* name) { return cmd.get_option(name)->count() > 0; };
  auto refuse = [](const char* name, double v, const char* want) {
    throw ConfigError(fmt::format("{} {}: expected {}", name, v, want));
  };
  if (given("--min-reps") && o.min_reps < 1) refuse("--min-reps", double(o.min_reps), "a positive integer");
  if (given("--max-reps") && o.max_reps < 1) refuse("--max-reps", double(o.max_reps), "a positive integer");
  if (given("--blocks") && o.blocks < 1) refuse("--blocks", double(o.blocks), "an integer in 1 .. 16");
  if (given("--point-budget-ms") && !(o.point_budget_ms > 0))
    refuse("--point-budget-ms", o.point_budget_ms, "a number of milliseconds in (0, 3600000]");
}

}  // namespace tlb::cli
