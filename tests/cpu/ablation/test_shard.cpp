// Shards of a sweep: --shard parsing, the schedulers' environment (the flag wins, Slurm's
// minimum offset, Kubernetes with its count given, torchrun, a malformed variable named), and
// the cut itself: for the official plan and for random plans, the shards of every n in 1..16
// are disjoint, cover every (case, dtype) group and are balanced by the plan's time model.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "ablation_test_util.hpp"
#include "config.hpp"
#include "dispatch_table.hpp"
#include "grid.hpp"
#include "run_schedule.hpp"
#include "shard.hpp"

using namespace tlb;

namespace {

const std::string kSource = TLBENCH_SOURCE_DIR;

const CaseSet& official_cases() {
  static const CaseSet set = load_cases(kSource + "/configs/cases.json");
  return set;
}
const TechniqueSet& official_techniques() {
  static const TechniqueSet set = load_techniques(kSource + "/configs/techniques.json");
  return set;
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

Plan plan_of(const std::string& cases, const std::string& configs, const std::string& dtypes,
             const std::string& policy, uint64_t seed = kDefaultRunSeed) {
  Selection sel = parse_selection(cases, configs, dtypes, official_cases(), official_techniques());
  apply_policy_option(sel, policy);
  return assignment_plan(official_cases(), official_techniques(), sel, seed, {}, false, nullptr);
}

// Every n in 1..16: each group in exactly one shard, the points adding up to the plan's, and
// each shard's modelled time within 15 % of an even share or one group of it.
void check_cuts(const Plan& plan) {
  const std::vector<ShardGroup> groups = plan_groups(plan);
  double largest = 0;
  for (const ShardGroup& g : groups) largest = std::max(largest, g.seconds);
  for (int n = 1; n <= 16; ++n) {
    INFO("shards: " << n << ", groups: " << groups.size());
    std::map<std::pair<int, DType>, int> owners;
    size_t points = 0;
    const double share = plan.estimated_seconds / n;
    for (int i = 1; i <= n; ++i) {
      const ShardCut cut = cut_shard(ShardSpec{i, n, "--shard"}, plan);
      CHECK(cut.plan_points == plan.total_points);
      double seconds = 0;
      for (const ShardGroup& g : cut.groups) {
        ++owners[{g.case_id, g.dtype}];
        points += g.points;
        seconds += g.seconds;
      }
      CHECK(seconds == Approx(cut.seconds));
      CHECK(std::abs(seconds - share) <= std::max(0.15 * share, largest) * (1 + 1e-12));
    }
    CHECK(owners.size() == groups.size());
    CHECK(std::all_of(owners.begin(), owners.end(), [](const auto& o) { return o.second == 1; }));
    CHECK(points == plan.total_points);
  }
}

}  // namespace

TEST_CASE("a shard is i/n with 1 <= i <= n, anything else is one line naming the value", "[shard]") {
  const ShardSpec s = parse_shard("2/4");
  CHECK(s.index == 2);
  CHECK(s.count == 4);
  CHECK(s.source == "--shard");
  CHECK(parse_shard("1/1").count == 1);
  for (const char* bad : {"0/4", "5/4", "a/b", "1/0", "0/0", "", "2", "2/", "/4", "2/4x", " 2/4", "-1/4", "2.0/4"}) {
    INFO(bad);
    const std::string e = error_of([&] { parse_shard(bad); });
    CHECK(e.rfind("--shard ", 0) == 0);
    CHECK(e.find("expected i/n with 1 <= i <= n") != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
  }
}

TEST_CASE("the shard comes from the flag, else Slurm, Kubernetes or torchrun variables", "[shard]") {
  CHECK_FALSE(shard_from_environment(env_of({})));
  CHECK_FALSE(resolve_shard(std::nullopt, env_of({{"SLURM_JOB_ID", "12"}})));

  // Slurm: relative to the array's minimum (--array=5-8).
  const auto slurm = env_of({{"SLURM_ARRAY_TASK_ID", "7"}, {"SLURM_ARRAY_TASK_MIN", "5"}, {"SLURM_ARRAY_TASK_COUNT", "4"}});
  std::optional<ShardSpec> s = resolve_shard(std::nullopt, slurm);
  REQUIRE(s);
  CHECK((s->index == 3 && s->count == 4 && s->source == "slurm"));
  s = resolve_shard(std::string("1/2"), slurm);  // the flag wins
  CHECK((s->index == 1 && s->count == 2 && s->source == "--shard"));

  s = resolve_shard(std::nullopt, env_of({{"JOB_COMPLETION_INDEX", "0"}, {"TLBENCH_SHARD_COUNT", "3"}}));
  CHECK((s->index == 1 && s->count == 3 && s->source == "k8s"));
  s = resolve_shard(std::nullopt, env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}}));
  CHECK((s->index == 4 && s->count == 4 && s->source == "torchrun"));
  // Slurm first where a torchrun job runs inside an array task.
  s = resolve_shard(std::nullopt, env_of({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                          {"SLURM_ARRAY_TASK_COUNT", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "8"}}));
  CHECK((s->index == 1 && s->count == 2 && s->source == "slurm"));
}

TEST_CASE("a malformed or missing scheduler variable is an error naming it", "[shard]") {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> bad = {
      {{{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}, "SLURM_ARRAY_TASK_ID"},
      {{{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"}}, "SLURM_ARRAY_TASK_COUNT"},
      {{{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}, "SLURM_ARRAY_TASK_MIN"},
      {{{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_MIN", "5"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}, "SLURM_ARRAY_TASK_ID"},
      {{{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "0"}}, "SLURM_ARRAY_TASK_COUNT"},
      {{{"JOB_COMPLETION_INDEX", "2"}}, "TLBENCH_SHARD_COUNT"},
      {{{"JOB_COMPLETION_INDEX", "4"}, {"TLBENCH_SHARD_COUNT", "4"}}, "JOB_COMPLETION_INDEX"},
      {{{"JOB_COMPLETION_INDEX", "-1"}, {"TLBENCH_SHARD_COUNT", "4"}}, "JOB_COMPLETION_INDEX"},
      {{{"RANK", "0"}}, "WORLD_SIZE"},
      {{{"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "a"}, {"WORLD_SIZE", "2"}}, "RANK"},
  };
  for (const auto& [vars, name] : bad) {
    INFO(name);
    const std::string e = error_of([&] { shard_from_environment(env_of(vars)); });
    CHECK(e.rfind(name, 0) == 0);
    CHECK(e.find('\n') == std::string::npos);
  }
}

TEST_CASE("the official plan's shards are disjoint, cover its groups and are balanced", "[shard]") {
  check_cuts(plan_of("", "", "", "case"));
  check_cuts(plan_of("", "", "", "auto"));
}

TEST_CASE("random plans' shards are disjoint, cover their groups and are balanced", "[shard]") {
  std::mt19937 rng(18);
  const std::vector<std::string> patterns = {"", "1xxxx", "x0x1x", "11000,00111", "auto", "xxxx0,auto"};
  const std::vector<std::string> dtypes = {"", "fp16", "bf16,fp32", "fp16,fp32"};
  for (int k = 0; k < 24; ++k) {
    std::string cases;
    for (const CaseSpec& c : official_cases().cases)
      if (rng() % 3 != 0) {
        if (!cases.empty()) cases += ',';
        cases += std::to_string(c.id);
      }
    if (cases.empty()) cases = "1";
    const std::string configs = patterns[rng() % patterns.size()];
    const std::string dt = dtypes[rng() % dtypes.size()];
    INFO("--cases " << cases << " --configs " << configs << " --dtypes " << dt);
    check_cuts(plan_of(cases, configs, dt, rng() % 2 ? "auto" : "case", rng()));
  }
}

TEST_CASE("a shard cut survives run.json, and a malformed one names its field", "[shard]") {
  const Plan plan = plan_of("", "", "", "auto");
  const ShardCut cut = cut_shard(ShardSpec{3, 5, "k8s"}, plan);
  const ShardCut back = shard_cut_from_json(to_json(cut), "run.json");
  CHECK(to_json(back) == to_json(cut));
  CHECK(back.owns(cut.groups.front().case_id, cut.groups.front().dtype));

  const std::string e = error_of([&] {
    nlohmann::json j = to_json(cut);
    j["index"] = 6;
    shard_cut_from_json(j, "run.json");
  });
  CHECK(e.find("run.json: $.shard.index") == 0);
}

TEST_CASE("the shard's plan and schedule hold exactly its groups' points, in grid order", "[shard]") {
  Selection sel = parse_selection("", "", "", official_cases(), official_techniques());
  apply_policy_option(sel, "auto");
  const Plan full = make_plan(official_cases(), official_techniques(), sel, kDefaultRunSeed,
                              fixed_memory_budget(141, "test"), {}, run_time_model(false));
  const Plan cutting = plan_of("", "", "", "auto");
  size_t points = 0;
  for (int i = 1; i <= 4; ++i) {
    ShardCut cut = cut_shard(ShardSpec{i, 4, "--shard"}, cutting);
    const Plan part = shard_plan(full, cut);
    const nlohmann::json j = nlohmann::json::parse(plan_json(part));
    CHECK(j["total_points"] == part.total_points);
    size_t in_json = 0;
    for (const auto& c : j["cases"])
      for (const auto& d : c["dtypes"]) {
        DType dt{};
        REQUIRE(parse_dtype(d["dtype"].get<std::string>(), dt));
        CHECK(cut.owns(c["id"].get<int>(), dt));
        in_json += d["order"].size();
      }
    CHECK(in_json == part.total_points);

    RunOptions opt;
    opt.policy = "auto";
    const std::vector<GridPoint> grid = build_grid(official_cases(), official_techniques(), sel, opt.seed);
    Schedule sched = build_schedule(opt, official_cases(), official_techniques(), sel, grid,
                                    builtin_dispatch_table());
    keep_shard_points(sched, official_cases(), cut);
    CHECK(sched.points.size() == part.total_points);
    CHECK(cut.plan_points == grid.size());
    CHECK(sched.info.auto_points == static_cast<size_t>(part.auto_points));
    for (size_t k = 1; k < sched.points.size(); ++k)
      CHECK(std::make_pair(sched.points[k - 1].case_index, int(sched.points[k - 1].dtype)) <=
            std::make_pair(sched.points[k].case_index, int(sched.points[k].dtype)));
    points += sched.points.size();
  }
  CHECK(points == full.total_points);
}

TEST_CASE("timing options change the modelled times, never the cut", "[shard][plan]") {
  Selection sel = parse_selection("", "", "", official_cases(), official_techniques());
  apply_policy_option(sel, "auto");
  RunOptions o;
  resolve_defaults(o);
  CHECK(run_time_model(o).blocks == 2);
  CHECK(run_time_model(o).point_time_budget_s == Approx(run_time_model(false).point_time_budget_s));
  CHECK(run_time_model(o).floor_pairs == run_time_model(false).floor_pairs);
  o.blocks = 4;
  o.point_budget_ms = 40;
  o.min_reps = 3;  // the floor follows a lower minimum
  const TimeModel model = run_time_model(o);
  CHECK(model.blocks == 4);
  CHECK(model.point_time_budget_s == Approx(0.040));
  CHECK(model.floor_pairs == 3);

  const Plan cutting = plan_of("", "", "", "auto");
  const Plan timed = assignment_plan(official_cases(), official_techniques(), sel, kDefaultRunSeed, {}, model, nullptr);
  CHECK(timed.total_points == cutting.total_points);
  CHECK(timed.estimated_seconds != Approx(cutting.estimated_seconds));
  double shards = 0;
  for (int i = 1; i <= 3; ++i) {
    const ShardCut cut = cut_shard(ShardSpec{i, 3, "--shard"}, cutting);
    ShardCut retimed = cut;
    retime_cut(retimed, timed);
    REQUIRE(retimed.groups.size() == cut.groups.size());
    double sum = 0;
    for (size_t g = 0; g < cut.groups.size(); ++g) {
      CHECK(retimed.groups[g].case_id == cut.groups[g].case_id);
      CHECK(retimed.groups[g].dtype == cut.groups[g].dtype);
      CHECK(retimed.groups[g].points == cut.groups[g].points);
      sum += retimed.groups[g].seconds;
    }
    CHECK(retimed.seconds == Approx(sum));
    CHECK(retimed.plan_seconds == Approx(timed.estimated_seconds));
    shards += retimed.seconds;
  }
  CHECK(shards == Approx(timed.estimated_seconds));
}

TEST_CASE("tlbench plan --shard lists the shard's points, and bad shards are exit 2 before any work", "[shard][cli]") {
  test::Scratch s("tlbench-shard", "cli");
  const std::string cases = kSource + "/configs/cases.json";
  auto tlbench = [&](const std::string& args, const std::string& env = "") {
    return test::run_command("cd " + s.dir.string() + " && " + env + " " + TLBENCH_BINARY + " " + args, s.dir);
  };
  size_t points = 0;
  int total = -1;
  for (int i = 1; i <= 3; ++i) {
    const test::CommandResult r =
        tlbench("plan --config " + cases + " --policy auto --mem-gib 141 --json --shard " + std::to_string(i) + "/3");
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["shard"]["index"] == i);
    CHECK(j["shard"]["source"] == "--shard");
    points += j["total_points"].get<size_t>();
    total = j["shard"]["plan_points"].get<int>();
  }
  CHECK(points == static_cast<size_t>(total));
  const test::CommandResult text = tlbench("plan --config " + cases + " --mem-gib 141 --shard 2/3");
  CHECK(text.exit_code == 0);
  CHECK(text.out.rfind("shard 2/3 (--shard): ", 0) == 0);
  // --blocks times the estimate as run --blocks would, and leaves the cut as it is.
  auto shard_json = [&](const std::string& extra) {
    const test::CommandResult r = tlbench("plan --config " + cases + " --mem-gib 141 --json --shard 2/3" + extra);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json two = shard_json(""), four = shard_json(" --blocks 4"), one = shard_json(" --blocks 1");
  CHECK(four["shard"]["groups"] == two["shard"]["groups"]);
  CHECK(one["shard"]["groups"] == two["shard"]["groups"]);
  CHECK(four["shard"]["predicted_seconds"].get<double>() > two["shard"]["predicted_seconds"].get<double>());
  CHECK(one["shard"]["predicted_seconds"].get<double>() < two["shard"]["predicted_seconds"].get<double>());
  CHECK(four["time_estimate"]["model"]["blocks"] == 4);

  for (const char* bad : {"0/4", "5/4", "a/b", "1/0"}) {
    INFO(bad);
    for (const std::string& cmd : {"plan --config " + cases, "run --config " + cases + " --out fresh"}) {
      const test::CommandResult r = tlbench(cmd + " --shard " + bad);
      CHECK(r.exit_code == 2);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      CHECK(r.err.find("--shard") != std::string::npos);
    }
  }
  // Without a flag a malformed scheduler variable stops the run before the device is asked for.
  const test::CommandResult env = tlbench("run --config " + cases + " --out fresh", "RANK=one WORLD_SIZE=2");
  CHECK(env.exit_code == 2);
  CHECK(env.err.find("RANK=\"one\"") != std::string::npos);
  CHECK(s.listing().empty());
}
