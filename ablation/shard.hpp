// Sweeps split into shards: `tlbench run --shard i/n` measures one deterministic part of the
// planned grid. A shard owns whole (case, dtype) groups, never part of one: a group's golden,
// its baseline and its auto point (chosen from the group's own fixed rows) are computed once,
// on one GPU, exactly as an unsplit run computes them. Groups are dealt by the plan's time
// model (longest first, each to the least loaded shard), with the memory budget fixed so that
// every machine, whatever its free memory, computes the same cut.
//
// Without --shard the index and count come from the scheduler's environment, the first found:
//   slurm     SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1 of SLURM_ARRAY_TASK_COUNT
//   k8s       JOB_COMPLETION_INDEX + 1 of TLBENCH_SHARD_COUNT (an Indexed Job does not
//             tell a pod how many completions there are; the Job sets it next to them)
//   torchrun  RANK + 1 of WORLD_SIZE
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "plan_report.hpp"
#include "run_options.hpp"
#include "run_schedule.hpp"

namespace tlb {

struct ShardSpec {
  int index = 0;       // 1-based
  int count = 0;
  std::string source;  // "--shard", "slurm", "k8s" or "torchrun"
};

// "i/n" as given to --shard; ConfigError "--shard 0/4: expected i/n with 1 <= i <= n".
ShardSpec parse_shard(const std::string& text);

// The environment as a lookup (std::getenv; tests give their own). nullptr: not set.
using EnvLookup = std::function<const char*(const char*)>;
// The scheduler's shard, or nullopt where none of the variables above is set. A variable that
// is set but malformed or out of range is a ConfigError naming it.
std::optional<ShardSpec> shard_from_environment(const EnvLookup& env);
// --shard (its text where given) wins over the environment.
std::optional<ShardSpec> resolve_shard(const std::optional<std::string>& flag, const EnvLookup& env);

// One (case, dtype) group of a plan, in grid order, with its modelled time.
struct ShardGroup {
  int case_id = 0;
  DType dtype = DType::fp16;
  size_t points = 0;
  double seconds = 0;
};
std::vector<ShardGroup> plan_groups(const Plan& plan);

// The shard (1-based) of each group: longest group first (grid order on ties), each to the
// shard with the least time so far (the lowest index on ties). No shard's time is then more
// than its largest group away from any other's.
std::vector<int> assign_groups(const std::vector<ShardGroup>& groups, int count);

// The time model of a run with these options (resolved: resolve_defaults), for the plan.
TimeModel run_time_model(const RunOptions& o);
// The time model of `tlbench run` (or run --quick) with its default timing options.
TimeModel run_time_model(bool quick);

// The plan the cut is made on: the run's grid and options, the budget fixed at kDefaultMemGiB
// and the timing at the mode's defaults, so that shards started with other timing options
// (--blocks, --point-budget-ms, ...) still cut the grid alike; those options scale every
// group's time about alike, which leaves the balance as it is.
Plan assignment_plan(const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
                     uint64_t seed, const PathMemoryOptions& paths, bool quick,
                     const DispatchTable* dispatch);
// The same plan timed by `model` (run_time_model of the run's own options), for retime_cut.
Plan assignment_plan(const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
                     uint64_t seed, const PathMemoryOptions& paths, const TimeModel& model,
                     const DispatchTable* dispatch);

// What one shard owns, as run.json records it ($.shard).
struct ShardCut {
  ShardSpec spec;
  std::vector<ShardGroup> groups;  // owned, in grid order
  size_t plan_points = 0, plan_groups = 0;
  double seconds = 0, plan_seconds = 0;  // modelled: this shard's, the whole plan's
  bool owns(int case_id, DType dtype) const;
};
ShardCut cut_shard(const ShardSpec& spec, const Plan& assignment);
// The cut's modelled times (its own and the whole plan's) taken from `timed`, the same grid
// planned with the run's timing options; the groups stay as cut.
void retime_cut(ShardCut& cut, const Plan& timed);
nlohmann::json to_json(const ShardCut& cut);
// $.shard of a run.json (a resumed shard keeps the groups it began with); ConfigError naming
// `source` and the field where it is malformed.
ShardCut shard_cut_from_json(const nlohmann::json& j, const std::string& source);

// `plan` without the groups the shard does not own (totals recomputed).
Plan shard_plan(const Plan& plan, const ShardCut& cut);
// The schedule without the points of groups the shard does not own; the cut's point counts
// become the schedule's (an A/A run has one point per group).
void keep_shard_points(Schedule& s, const CaseSet& cases, ShardCut& cut);

// "shard 2/4 (slurm): 11 of 42 (case, dtype) groups, 352 of 1386 points, about 2.1 min of 8.3 min"
std::string shard_summary(const ShardCut& cut);

}  // namespace tlb
