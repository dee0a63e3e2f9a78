// `tlbench run`: measures every point of the grid, case by case and dtype by dtype. The parts:
// run_options (options, defaults, --resume), run_schedule (the points and auto's choices),
// point_measure (one point), run_document (run.json), run_report (what it prints, exit
// codes); runner.cpp validates before writing anything and loops over the (case, dtype) groups.
//
// Per (case, dtype): the fp32 golden is computed once and its output kept on the device; the
// case's weights and input are generated once; the baseline (the reference, or attn-only where
// the dense reference cannot fit) is built once and its output kept. Per configuration, in the
// seeded order: predicted memory against the budget (nonviable points are never attempted),
// construction (an allocation failure is an `oom` row), one poisoned run checked against the
// baseline and the golden, then paired ABBA timing against the baseline in --blocks blocks:
// every configuration's first block, then every one's second (its path built anew), and the
// group's rows on disk together once its last block is timed (with one block, each row is on
// disk before the next point starts). The auto point (--policy auto) is one more
// configuration of its group: the dispatch table's choice for the case and dtype, chosen from
// the group's rows and measured after them the same way, its row labelled "auto".
//
// Stops: Ctrl-C/SIGTERM and sticky device faults end the run cleanly (run.json says
// "interrupted" / "device-fault"), as does --time-limit (time_limit.hpp: "time-limit", between
// groups where it can), and `tlbench run --resume DIR` measures what is left, never a point
// twice.
#pragma once

#include <optional>
#include <vector>

#include "config.hpp"
#include "dispatch_table.hpp"
#include "grid.hpp"
#include "run_options.hpp"
#include "shard.hpp"
#include "text.hpp"

namespace tlb {

// What a run measures, loaded and checked from its options (cases, techniques, the selection,
// the grid, the dispatch table where one is named or an auto point needs it): ConfigError on
// bad input, nothing written, no device asked. `run --devices` checks its shards' inputs with it
// before starting any.
struct RunInputs {
  CaseSet cases;
  TechniqueSet techniques;
  Selection sel;
  std::vector<GridPoint> grid;
  std::optional<DispatchTable> table;
  std::optional<ConfigPatterns> stage_time_points;  // --stage-times-configs, where given
};
RunInputs load_run_inputs(const RunOptions& opt);

// Validates everything (configs, selection, output folder) before writing anything, checks for
// a device, then runs. Returns the exit code: 0 ok; 1 a measured point failed the golden
// criterion; 3 device fault, no device, or a point that could not run (status error); 130
// interrupted; 75 stopped by --time-limit. Throws ConfigError (exit 2) on bad input: nothing has been written then. With
// `shard`, only the groups the shard owns are measured (a resumed run keeps its own shard).
int run_command(RunOptions opt, const std::optional<ShardSpec>& shard = std::nullopt);

}  // namespace tlb
