// `tlbench plan`: the grid a run would measure, memory per path and point, viability under the
// memory budget, and a time estimate. Needs no GPU; everything is loaded and validated before
// the first line is printed.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "config.hpp"
#include "dispatch_table.hpp"
#include "grid.hpp"
#include "plan_report.hpp"
#include "run_options.hpp"
#include "runner.hpp"
#include "shard.hpp"

namespace {

struct PlanArgs {
  std::string config;
  std::string techniques;
  std::string cases, configs, dtypes;
  std::string seed = std::to_string(tlb::kDefaultRunSeed);
  double mem_gib = tlb::kDefaultMemGiB;
  std::string fp32_math = "tf32";
  bool layer_trace = false;
  bool quick = false;
  std::string policy = "case";
  std::string dispatch_table;
  std::string shard;
  bool json = false;
  tlb::RunOptions timing;  // the timing options only, as run takes them
};

// --techniques if given; else techniques.json beside the cases file; else the built-in five.
tlb::TechniqueSet load_techniques_for(const PlanArgs& a) {
  if (!a.techniques.empty()) return tlb::load_techniques(a.techniques);
  const std::filesystem::path beside = std::filesystem::path(a.config).parent_path() / "techniques.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(beside, ec)) return tlb::load_techniques(beside.string());
  return tlb::default_techniques();
}

// The shard's part of the plan, with the cut ($.shard in --json, a first line in the tables).
void print_shard_plan(const tlb::Plan& part, const tlb::ShardCut& cut, bool json) {
  if (json) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(tlb::plan_json(part));
    doc["shard"] = tlb::to_json(cut);
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  fmt::print("{}\n", tlb::shard_summary(cut));
  tlb::print_plan(part, stdout);
}

const bool kRegistered = tlb::cli::register_command(10, [](CLI::App& root, int& rc) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = root.add_subcommand(
      "plan", "Show the grid, memory per path and point, viability and a time estimate (no GPU needed)");
  cmd->add_option("--config", args->config, "cases file (cases.json)")->required();
  cmd->add_option("--techniques", args->techniques,
                  "techniques file (default: techniques.json beside --config, else the built-in five)");
  cmd->add_option("--cases", args->cases, "case ids and ranges, e.g. 1-5,9 (default: all)");
  cmd->add_option("--configs", args->configs,
                  "configuration patterns over 0/1/x, one character per technique, e.g. 11000,1xxxx; "
                  "auto for the dispatcher's point");
  cmd->add_option("--dtypes", args->dtypes, "fp16,bf16,fp32 (default: each case's own)");
  cmd->add_option("--seed", args->seed, "seed of the configuration order (and of data)")
      ->capture_default_str();
  CLI::Option* mem = cmd->add_option(
      "--mem-gib", args->mem_gib,
      "memory budget in GiB (default: free memory of CUDA device 0, else 80)");
  cmd->add_option("--fp32-math", args->fp32_math, "the fused path's fp32 mode, as for run: tf32 or ieee")
      ->capture_default_str();
  cmd->add_flag("--layer-trace", args->layer_trace, "plan for run's per-layer error trace");
  cmd->add_flag("--quick", args->quick,
                "plan run's smoke run: without --configs, each technique alone and all together");
  cmd->add_option("--policy", args->policy,
                  "case (each case's own) or auto (adds the dispatcher's point per case and dtype)")
      ->capture_default_str();
  cmd->add_option("--dispatch-table", args->dispatch_table,
                  "dispatch table for auto points (default: the built-in one)");
  tlb::cli::add_timing_options(*cmd, args->timing);
  cmd->add_flag("--json", args->json, "print a JSON document instead of tables");
  CLI::Option* shard_opt = cmd->add_option(
      "--shard", args->shard, "only the points run --shard i/n measures (1-based), and their time");
  cmd->callback([args, cmd, mem, shard_opt, &rc]() {
    tlb::cli::check_timing_options(*cmd, args->timing);
    args->timing.quick = args->quick;
    tlb::resolve_defaults(args->timing);
    const uint64_t seed = tlb::cli::parse_seed(args->seed);
    std::optional<tlb::ShardSpec> shard;
    if (shard_opt->count() > 0) shard = tlb::parse_shard(args->shard);
    const tlb::CaseSet cases = tlb::load_cases(args->config);
    const tlb::TechniqueSet techniques = load_techniques_for(*args);
    tlb::Selection sel =
        tlb::parse_selection(args->cases, args->configs, args->dtypes, cases, techniques);
    tlb::apply_policy_option(sel, args->policy);
    if (args->quick) tlb::narrow_for_quick(sel, techniques);
    // A table given is read (and checked) even when no point is auto.
    std::optional<tlb::DispatchTable> table;
    if (!args->dispatch_table.empty()) table = tlb::load_dispatch_table(args->dispatch_table);
    const tlb::MemoryBudget budget = tlb::resolve_memory_budget(
        mem->count() > 0 ? std::optional<double>(args->mem_gib) : std::nullopt);
    tlb::PathMemoryOptions paths;
    if (!tlb::parse_fp32_math(args->fp32_math, paths.fp32_math))
      throw tlb::ConfigError("--fp32-math: unknown mode '" + args->fp32_math + "' (expected tf32 or ieee)");
    paths.keep_layer_outputs = args->layer_trace;
    // The time model times points the way `tlbench run` with these options would.
    const tlb::TimeModel model = tlb::run_time_model(args->timing);
    const tlb::DispatchTable* dispatch = table ? &*table : nullptr;
    const tlb::Plan plan = tlb::make_plan(cases, techniques, sel, seed, budget, paths, model, dispatch);
    if (!shard) {
      if (args->json)
        fmt::print("{}", tlb::plan_json(plan));
      else
        tlb::print_plan(plan, stdout);
    } else {
      tlb::ShardCut cut = tlb::cut_shard(
          *shard, tlb::assignment_plan(cases, techniques, sel, seed, paths, args->quick, dispatch));
      tlb::retime_cut(cut, plan);
      print_shard_plan(tlb::shard_plan(plan, cut), cut, args->json);
    }
    rc = tlb::cli::kOk;
  });
});

}  // namespace
