#include "run_options.hpp"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "json_fields.hpp"
#include "text.hpp"

namespace tlb {

namespace fs = std::filesystem;
using json = nlohmann::json;

ModeDefaults mode_defaults(bool quick) {
  if (quick) return {3, 200, 25.0, 5.0, 1, 3, 1};
  return {10, 2000, 100.0, 25.0, 3, 5, 2};
}

void resolve_defaults(RunOptions& o) {
  const ModeDefaults d = mode_defaults(o.quick);
  if (o.min_reps <= 0) o.min_reps = d.min_reps;
  if (o.max_reps <= 0) o.max_reps = d.max_reps;
  if (o.point_budget_ms <= 0) o.point_budget_ms = d.point_budget_ms;
  if (o.blocks <= 0) o.blocks = d.blocks;
  if (o.max_reps < o.min_reps)
    throw ConfigError(fmt::format("--max-reps {} is below --min-reps {}", o.max_reps, o.min_reps));
  auto refuse = [](const char* option, double v, const char* want) {
    throw ConfigError(fmt::format("{} {}: expected {}", option, v, want));
  };
  if (!(std::isfinite(o.tol.atol) && o.tol.atol >= 0)) refuse("--atol", o.tol.atol, "a finite number >= 0");
  if (!(std::isfinite(o.tol.rtol) && o.tol.rtol >= 0)) refuse("--rtol", o.tol.rtol, "a finite number >= 0");
  if (!(o.memory_margin_mib >= 0 && o.memory_margin_mib <= kMaxMemoryMarginMib))
    refuse("--mem-reserve-mib", o.memory_margin_mib, "a number of MiB in [0, 16777216]");
  if (!(o.point_budget_ms > 0 && o.point_budget_ms <= kMaxPointBudgetMs))
    refuse("--point-budget-ms", o.point_budget_ms, "a number of milliseconds in (0, 3600000]");
  if (o.blocks > kMaxBlocks) refuse("--blocks", double(o.blocks), "an integer in 1 .. 16");
}

TimerOptions timer_options(const RunOptions& o) {
  const ModeDefaults d = mode_defaults(o.quick);
  TimerOptions t;
  t.warmup_min_runs = d.warmup_min_runs;
  t.warmup_min_ms = d.warmup_min_ms;
  t.stop.min_pairs = static_cast<size_t>(o.min_reps);
  t.stop.max_pairs = static_cast<size_t>(o.max_reps);
  t.stop.budget_ms = o.point_budget_ms;
  t.stop.target_rel_half_width = o.target_rel_ci;
  t.stop.floor_pairs = std::min(d.floor_pairs, t.stop.min_pairs);
  return t;
}

size_t block_floor_pairs(size_t floor_total, size_t blocks, size_t block) {
  if (blocks <= 1) return floor_total;
  const size_t share = floor_total / blocks + (block < floor_total % blocks ? 1 : 0);
  return std::max<size_t>(share, 2);
}

TimerOptions block_timer_options(const RunOptions& o, size_t block) {
  TimerOptions t = timer_options(o);
  const auto blocks = static_cast<size_t>(std::max<int64_t>(o.blocks, 1));
  if (blocks == 1) return t;
  t.stop.min_pairs = (t.stop.min_pairs + blocks - 1) / blocks;
  // The pair limit shared out, earlier blocks taking the remainder (at least one a block).
  t.stop.max_pairs = std::max<size_t>(t.stop.max_pairs / blocks + (block < t.stop.max_pairs % blocks ? 1 : 0), 1);
  t.stop.min_pairs = std::min(t.stop.min_pairs, t.stop.max_pairs);  // --min-reps = --max-reps: both shared alike
  t.stop.budget_ms /= static_cast<double>(blocks);
  t.stop.target_rel_half_width *= std::sqrt(static_cast<double>(blocks));
  t.stop.floor_pairs = std::min(block_floor_pairs(t.stop.floor_pairs, blocks, block), t.stop.min_pairs);
  if (block > 0) {
    // The GPU has been busy with the group's other points and the baseline ran last: the
    // rebuilt candidate needs a run to settle (a graph's first launch), not a clock ramp.
    t.warmup_min_runs = 1;
    t.warmup_min_ms = std::min(t.warmup_min_ms, kLaterBlockWarmupMs);
    t.warmup_ref_runs = 0;
  }
  return t;
}

json options_to_json(const RunOptions& o) {
  return {
      {"cases_path", o.cases_path},
      {"techniques_path", o.techniques_path},
      {"cases", o.cases_sel},
      {"configs", o.configs_sel},
      {"dtypes", o.dtypes_sel},
      {"out_dir", o.out_dir},
      {"quick", o.quick},
      {"seed", o.seed},
      {"fp32_math", std::string(to_string(o.fp32_math))},
      {"l2_flush", o.l2_flush},
      {"aa", o.aa},
      {"layer_trace", o.layer_trace},
      {"stage_times", o.stage_times},
      {"stage_times_configs", o.stage_times_configs},
      {"atol", o.tol.atol},
      {"rtol", o.tol.rtol},
      {"min_reps", o.min_reps},
      {"max_reps", o.max_reps},
      {"point_budget_ms", o.point_budget_ms},
      {"target_rel_ci", o.target_rel_ci},
      {"blocks", o.blocks},
      {"memory_margin_mib", o.memory_margin_mib},
      {"policy", o.policy},
      {"dispatch_table", o.dispatch_table},
  };
}

RunOptions options_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) json_fields::fail(source, "$.options", "expected an object");
  auto fail = [&](const char* key, const char* problem) {
    json_fields::fail(source, json_fields::key_path("$.options", key), problem);
  };
  auto need = [&](const char* key) -> const json& {
    auto it = j.find(key);
    if (it == j.end()) fail(key, "missing");
    return *it;
  };
  auto str = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_string()) fail(key, "expected a string");
    return v.get<std::string>();
  };
  auto boolean = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_boolean()) fail(key, "expected true or false");
    return v.get<bool>();
  };
  auto number = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_number()) fail(key, "expected a number");
    return v.get<double>();
  };
  RunOptions o;
  o.cases_path = str("cases_path");
  o.techniques_path = str("techniques_path");
  o.cases_sel = str("cases");
  o.configs_sel = str("configs");
  o.dtypes_sel = str("dtypes");
  o.out_dir = str("out_dir");
  o.quick = boolean("quick");
  {
    // Parsed JSON holds a non-negative integer as unsigned; anything else would wrap.
    const json& v = need("seed");
    if (!v.is_number_unsigned()) fail("seed", "expected an integer in 0 .. 18446744073709551615");
    o.seed = v.get<uint64_t>();
  }
  if (!parse_fp32_math(str("fp32_math"), o.fp32_math)) fail("fp32_math", "expected tf32 or ieee");
  o.l2_flush = boolean("l2_flush");
  o.aa = boolean("aa");
  o.layer_trace = boolean("layer_trace");
  o.stage_times = j.contains("stage_times") && boolean("stage_times");  // absent before the option
  o.stage_times_configs = j.contains("stage_times_configs") ? str("stage_times_configs") : "";
  o.tol.atol = number("atol");
  o.tol.rtol = number("rtol");
  // Recorded after resolve_defaults, so 0 or less (which would mean "the default") is an edit.
  for (auto [key, field] : {std::pair{"min_reps", &o.min_reps}, std::pair{"max_reps", &o.max_reps}})
    *field = json_fields::get_integer(need(key), 1, std::numeric_limits<int64_t>::max(), "a positive integer",
                                      source, json_fields::key_path("$.options", key));
  o.point_budget_ms = number("point_budget_ms");
  o.target_rel_ci = number("target_rel_ci");
  o.memory_margin_mib = number("memory_margin_mib");
  // Runs begun before points were timed in blocks timed each in one.
  o.blocks = j.contains("blocks") ? json_fields::get_integer(need("blocks"), 1, kMaxBlocks, "an integer in 1 .. 16",
                                                             source, json_fields::key_path("$.options", "blocks"))
                                  : 1;
  // Runs begun before auto points existed have neither key.
  if (j.contains("policy")) o.policy = str("policy");
  if (j.contains("dispatch_table")) o.dispatch_table = str("dispatch_table");
  return o;
}

RunOptions options_for_resume(const std::string& dir, json& doc, const ResumeFiles& moved) {
  const std::string run_json = dir + "/run.json";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(fmt::format("--resume {}: no such folder", dir));
  if (!fs::exists(run_json, ec))
    throw ConfigError(fmt::format("--resume {}: {} is missing; not a tlbench run folder", dir, run_json));
  doc = json_fields::parse_document(json_fields::read_input_file(run_json), run_json);
  if (!doc.is_object() || !doc.contains("options"))
    json_fields::fail(run_json, "$.options", "missing");
  RunOptions opt = options_from_json(doc["options"], run_json);
  opt.out_dir = dir;
  opt.resume = true;
  struct File {
    const char* which;
    const char* option;
    const std::string& moved_to;
    std::string& path;
  };
  for (const File& f : {File{"cases", "--config", moved.cases, opt.cases_path},
                        File{"techniques", "--techniques", moved.techniques, opt.techniques_path}}) {
    const std::string key = std::string(f.which) + "_file";
    const json record = doc.value(key, json::object());
    const std::string recorded = record.value("path", "");
    const std::string want = record.value("fingerprint", "");
    const std::string path = f.moved_to.empty() ? recorded : f.moved_to;
    if (path.empty() || want.empty()) continue;
    if (f.moved_to.empty() && !fs::is_regular_file(path, ec))
      throw ConfigError(fmt::format("{}: $.{}_file.path: {} (as the run was given it) cannot be read "
                                    "from here; run from the folder the run began in, or name its "
                                    "new place with --resume {} {} PATH",
                                    run_json, f.which, path, dir, f.option));
    const std::string have = file_fingerprint(path);
    if (have != want)
      throw ConfigError(fmt::format("{}: {} file {} changed since the run began ({} != {}); "
                                    "restore it or start a new run",
                                    run_json, f.which, path, have, want));
    if (f.moved_to.empty()) continue;
    // A file named anew is recorded where it now is, so the next --resume finds it too.
    doc[key]["path"] = path;
    f.path = path;
    doc["options"] = options_to_json(opt);
  }
  return opt;
}

}  // namespace tlb
