#include "shard.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <numeric>

#include "json_fields.hpp"
#include "run_options.hpp"
#include "text.hpp"

namespace tlb {
namespace {

using json = nlohmann::json;

// A decimal integer in [lo, hi] with nothing around it (no sign, no spaces, no "2.0").
std::optional<long> parse_count(const std::string& t, long lo, long hi) {
  if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const long v = std::strtol(t.c_str(), nullptr, 10);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

constexpr long kMaxShards = 100000;

// `name`'s value as an integer in [lo, hi]; ConfigError naming the variable.
long env_integer(const EnvLookup& env, const char* name, long lo, long hi, const std::string& want) {
  const char* v = env(name);
  if (!v) throw ConfigError(fmt::format("{} is not set: needed for the shard ({})", name, want));
  const std::optional<long> n = parse_count(v, lo, hi);
  if (!n) throw ConfigError(fmt::format("{}={}: expected {}", name, json_fields::json_quoted(v), want));
  return *n;
}

// index0: the scheduler's 0-based index; the count is already checked to be >= 1.
ShardSpec spec_from(long index0, long count, const char* index_var, const std::string& source) {
  if (index0 >= count)
    throw ConfigError(fmt::format("{}: shard index {} (0-based) is not below the shard count {}",
                                  index_var, index0, count));
  return ShardSpec{static_cast<int>(index0 + 1), static_cast<int>(count), source};
}

}  // namespace

ShardSpec parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  std::optional<long> i, n;
  if (slash != std::string::npos) {
    n = parse_count(text.substr(slash + 1), 1, kMaxShards);
    if (n) i = parse_count(text.substr(0, slash), 1, *n);
  }
  if (!i || !n)
    throw ConfigError(fmt::format("--shard {}: expected i/n with 1 <= i <= n (e.g. 2/4)",
                                  json_fields::json_quoted(text)));
  return ShardSpec{static_cast<int>(*i), static_cast<int>(*n), "--shard"};
}

std::optional<ShardSpec> shard_from_environment(const EnvLookup& env) {
  const std::string positive = fmt::format("an integer in 1 .. {}", kMaxShards);
  const std::string index = fmt::format("an integer in 0 .. {}", kMaxShards - 1);
  if (env("SLURM_ARRAY_TASK_ID")) {
    // Array ids need not start at 0 or 1 (--array=3-6): the shard is the offset from the minimum.
    const long id = env_integer(env, "SLURM_ARRAY_TASK_ID", 0, 4 * kMaxShards, index);
    const long lo = env_integer(env, "SLURM_ARRAY_TASK_MIN", 0, 4 * kMaxShards, index);
    const long count = env_integer(env, "SLURM_ARRAY_TASK_COUNT", 1, kMaxShards, positive);
    if (id < lo)
      throw ConfigError(fmt::format("SLURM_ARRAY_TASK_ID={} is below SLURM_ARRAY_TASK_MIN={}", id, lo));
    return spec_from(id - lo, count, "SLURM_ARRAY_TASK_ID", "slurm");
  }
  if (env("JOB_COMPLETION_INDEX")) {
    const long id = env_integer(env, "JOB_COMPLETION_INDEX", 0, kMaxShards - 1, index);
    const long count = env_integer(env, "TLBENCH_SHARD_COUNT", 1, kMaxShards,
                                   positive + ", the Job's completions");
    return spec_from(id, count, "JOB_COMPLETION_INDEX", "k8s");
  }
  if (env("RANK") || env("WORLD_SIZE")) {
    const long rank = env_integer(env, "RANK", 0, kMaxShards - 1, index);
    const long count = env_integer(env, "WORLD_SIZE", 1, kMaxShards, positive);
    return spec_from(rank, count, "RANK", "torchrun");
  }
  return std::nullopt;
}

std::optional<ShardSpec> resolve_shard(const std::optional<std::string>& flag, const EnvLookup& env) {
  if (flag) return parse_shard(*flag);
  return shard_from_environment(env);
}

std::vector<ShardGroup> plan_groups(const Plan& plan) {
  std::vector<ShardGroup> groups;
  for (const CasePlan& cp : plan.cases)
    for (const DTypePlan& dp : cp.dtypes)
      groups.push_back({cp.spec->id, dp.dtype, static_cast<size_t>(dp.selected_points), dp.estimated_seconds});
  return groups;
}

std::vector<int> assign_groups(const std::vector<ShardGroup>& groups, int count) {
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return groups[a].seconds > groups[b].seconds; });
  std::vector<double> load(static_cast<size_t>(count), 0.0);
  std::vector<int> owner(groups.size(), 0);
  for (size_t g : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[least] += groups[g].seconds;
    owner[g] = static_cast<int>(least) + 1;
  }
  return owner;
}

TimeModel run_time_model(const RunOptions& o) {
  TimeModel model;
  const TimerOptions timer = timer_options(o);
  model.point_time_budget_s = timer.stop.budget_ms * 1e-3;
  model.warmup_s = timer.warmup_min_ms * 1e-3;
  model.warmup_min_runs = static_cast<int>(timer.warmup_min_runs);
  model.floor_pairs = static_cast<int>(timer.stop.floor_pairs);
  model.max_pairs = static_cast<int>(timer.stop.max_pairs);
  model.blocks = static_cast<int>(o.blocks);
  model.replays_host_bound = !o.aa;
  return model;
}

TimeModel run_time_model(bool quick) {
  RunOptions o;
  o.quick = quick;
  resolve_defaults(o);
  return run_time_model(o);
}

Plan assignment_plan(const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
                     uint64_t seed, const PathMemoryOptions& paths, bool quick,
                     const DispatchTable* dispatch) {
  return assignment_plan(cases, techniques, sel, seed, paths, run_time_model(quick), dispatch);
}

Plan assignment_plan(const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
                     uint64_t seed, const PathMemoryOptions& paths, const TimeModel& model,
                     const DispatchTable* dispatch) {
  // Free memory differs between machines (and from one moment to the next); the cut must not.
  const MemoryBudget fixed =
      fixed_memory_budget(kDefaultMemGiB, fmt::format("fixed for the shard cut ({} GiB)", kDefaultMemGiB));
  return make_plan(cases, techniques, sel, seed, fixed, paths, model, dispatch);
}

bool ShardCut::owns(int case_id, DType dtype) const {
  return std::any_of(groups.begin(), groups.end(),
                     [&](const ShardGroup& g) { return g.case_id == case_id && g.dtype == dtype; });
}

ShardCut cut_shard(const ShardSpec& spec, const Plan& assignment) {
  const std::vector<ShardGroup> all = plan_groups(assignment);
  const std::vector<int> owner = assign_groups(all, spec.count);
  ShardCut cut;
  cut.spec = spec;
  cut.plan_points = assignment.total_points;
  cut.plan_groups = all.size();
  cut.plan_seconds = assignment.estimated_seconds;
  for (size_t g = 0; g < all.size(); ++g)
    if (owner[g] == spec.index) {
      cut.groups.push_back(all[g]);
      cut.seconds += all[g].seconds;
    }
  return cut;
}

void retime_cut(ShardCut& cut, const Plan& timed) {
  cut.seconds = 0;
  for (const ShardGroup& t : plan_groups(timed))
    for (ShardGroup& g : cut.groups)
      if (g.case_id == t.case_id && g.dtype == t.dtype) {
        g.seconds = t.seconds;
        cut.seconds += t.seconds;
      }
  cut.plan_seconds = timed.estimated_seconds;
}

json to_json(const ShardCut& cut) {
  json groups = json::array();
  for (const ShardGroup& g : cut.groups)
    groups.push_back({{"case_id", g.case_id}, {"dtype", std::string(to_string(g.dtype))}, {"points", g.points}});
  return {{"index", cut.spec.index},
          {"count", cut.spec.count},
          {"source", cut.spec.source},
          {"groups", groups},
          {"plan_points", cut.plan_points},
          {"plan_groups", cut.plan_groups},
          {"predicted_seconds", cut.seconds},
          {"plan_predicted_seconds", cut.plan_seconds}};
}

ShardCut shard_cut_from_json(const json& j, const std::string& source) {
  namespace jf = json_fields;
  const std::string at = "$.shard";
  if (!j.is_object()) jf::fail(source, at, "expected an object, got " + jf::describe(j));
  jf::require_keys(j, {"index", "count", "source", "groups", "plan_points", "plan_groups"}, source, at);
  ShardCut cut;
  cut.spec.count = static_cast<int>(jf::get_integer(j["count"], 1, kMaxShards, "a shard count", source, at + ".count"));
  cut.spec.index = static_cast<int>(
      jf::get_integer(j["index"], 1, cut.spec.count, "a shard index in 1 .. count", source, at + ".index"));
  cut.spec.source = jf::get_string(j["source"], "a string", source, at + ".source");
  cut.plan_points = static_cast<size_t>(
      jf::get_integer(j["plan_points"], 0, INT64_MAX, "a point count", source, at + ".plan_points"));
  cut.plan_groups = static_cast<size_t>(
      jf::get_integer(j["plan_groups"], 0, INT64_MAX, "a group count", source, at + ".plan_groups"));
  cut.seconds = j.value("predicted_seconds", 0.0);
  cut.plan_seconds = j.value("plan_predicted_seconds", 0.0);
  if (!j["groups"].is_array()) jf::fail(source, at + ".groups", "expected an array");
  for (size_t i = 0; i < j["groups"].size(); ++i) {
    const json& g = j["groups"][i];
    const std::string gat = jf::index_path(at + ".groups", i);
    if (!g.is_object()) jf::fail(source, gat, "expected an object, got " + jf::describe(g));
    jf::require_keys(g, {"case_id", "dtype"}, source, gat);
    ShardGroup sg;
    sg.case_id = static_cast<int>(jf::get_integer(g["case_id"], INT32_MIN, INT32_MAX, "a case id", source, gat + ".case_id"));
    const std::string& dt = jf::get_string(g["dtype"], "a dtype", source, gat + ".dtype");
    if (!parse_dtype(dt, sg.dtype)) jf::fail(source, gat + ".dtype", "unknown dtype " + jf::json_quoted(dt));
    sg.points = static_cast<size_t>(g.value("points", 0));
    cut.groups.push_back(sg);
  }
  return cut;
}

Plan shard_plan(const Plan& plan, const ShardCut& cut) {
  Plan p = plan;
  p.cases.clear();
  p.total_points = 0;
  p.auto_points = 0;
  p.estimated_seconds = 0;
  for (int d = 0; d < kNumDTypes; ++d) p.points_per_dtype[d] = p.viable_per_dtype[d] = p.nonviable_per_dtype[d] = 0;
  for (const CasePlan& cp : plan.cases) {
    CasePlan kept = cp;
    kept.dtypes.clear();
    for (const DTypePlan& dp : cp.dtypes) {
      if (!cut.owns(cp.spec->id, dp.dtype)) continue;
      const int di = static_cast<int>(dp.dtype);
      p.total_points += static_cast<size_t>(dp.selected_points);
      p.auto_points += dp.has_auto ? 1 : 0;
      p.points_per_dtype[di] += dp.selected_points;
      p.viable_per_dtype[di] += dp.viable_points;
      p.nonviable_per_dtype[di] += dp.nonviable_points;
      p.estimated_seconds += dp.estimated_seconds;
      kept.dtypes.push_back(dp);
    }
    if (!kept.dtypes.empty()) p.cases.push_back(std::move(kept));
  }
  return p;
}

void keep_shard_points(Schedule& s, const CaseSet& cases, ShardCut& cut) {
  cut.plan_points = s.points.size();
  for (ShardGroup& g : cut.groups) g.points = 0;
  std::vector<SchedPoint> kept;
  s.info.auto_points = 0;
  for (SchedPoint& p : s.points) {
    const int id = cases.cases[p.case_index].id;
    auto g = std::find_if(cut.groups.begin(), cut.groups.end(),
                          [&](const ShardGroup& x) { return x.case_id == id && x.dtype == p.dtype; });
    if (g == cut.groups.end()) continue;
    ++g->points;
    s.info.auto_points += p.automatic ? 1 : 0;
    kept.push_back(std::move(p));
  }
  s.points = std::move(kept);
}

std::string shard_summary(const ShardCut& cut) {
  size_t points = 0;
  for (const ShardGroup& g : cut.groups) points += g.points;
  return fmt::format("shard {}/{} ({}): {} of {} (case, dtype) groups, {} of {} points, about {} of {} "
                     "(modelled)",
                     cut.spec.index, cut.spec.count, cut.spec.source, cut.groups.size(), cut.plan_groups,
                     points, cut.plan_points, human_duration(cut.seconds), human_duration(cut.plan_seconds));
}

}  // namespace tlb
