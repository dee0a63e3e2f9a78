// The options of `tlbench run` (what the command line sets and run.json keeps), the defaults
// of a full run and of --quick, and reading them back for --resume.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "accuracy.hpp"
#include "config.hpp"
#include "grid.hpp"
#include "paired_timer.hpp"

namespace tlb {

struct RunOptions {
  std::string cases_path;       // cases.json
  std::string techniques_path;  // empty: techniques.json beside the cases file, else built in
  std::string cases_sel, configs_sel, dtypes_sel;  // as given to --cases/--configs/--dtypes
  std::string out_dir;          // empty: runs/<UTC timestamp>
  bool resume = false;          // out_dir is a run to continue
  bool quick = false;
  uint64_t seed = kDefaultRunSeed;
  Fp32Math fp32_math = Fp32Math::tf32;
  bool l2_flush = false;
  bool aa = false;              // A/A: the reference against itself, one point per case and dtype
  bool layer_trace = false;
  bool stage_times = false;     // per-stage times and floors in every row (tlbench explain's events)
  // --stage-times-configs: the points that get them, as configuration patterns and "auto"
  // ("00000,auto": the reference and the dispatcher's point, what the stage breakdown chart
  // shows, for a fraction of the time); empty: every point.
  std::string stage_times_configs;
  Tolerance tol;
  // 0 = the mode's default (see resolve_defaults).
  int64_t min_reps = 0, max_reps = 0;
  double point_budget_ms = 0;
  double target_rel_ci = 0.01;
  // Blocks a point is timed in, apart in time (the group's other points run between them);
  // the pairs, the budget and the interval target are shared out among them.
  int64_t blocks = 0;
  double memory_margin_mib = 1024;  // left free under cudaMemGetInfo's free memory
  bool json = false;            // summary JSON on stdout at the end
  std::string command_line;     // as typed, for run.json
  // --time-limit: this process's wall time in seconds (0: none). Like the command line it
  // belongs to the process, not the run: run.json's segment records it, and --resume takes a
  // new one or none.
  double time_limit_s = 0;
  std::string policy = "case";  // "case": each case's own; "auto": add the dispatcher's point
  std::string dispatch_table;   // table for auto points; empty: the built-in one
};

// Defaults of a full run and of --quick. A full run: two blocks per point, >= 10 and <= 2000
// pairs, 100 ms per point (warm-up included), and at least 5 pairs (3 + 2) where a forward
// is so slow that the budget runs out first: on the H200 the official sweep's fp32 points
// (IEEE reference up to 260 ms a forward) take most of its time. --quick: one block, >= 3 and
// <= 200 pairs, 25 ms, warm-up >= 1 candidate run and >= 5 ms, and (without --configs) each
// technique alone plus all of them: the official sweep in about a minute, for smoke runs.
struct ModeDefaults {
  int64_t min_reps, max_reps;
  double point_budget_ms, warmup_min_ms;
  size_t warmup_min_runs;  // candidate runs before timing
  size_t floor_pairs;      // pairs a point gets even when its budget runs out first
  int64_t blocks;
};
// The most blocks a point may be timed in.
inline constexpr int64_t kMaxBlocks = 16;
ModeDefaults mode_defaults(bool quick);
// The largest per-point budget (an hour) and memory margin (16 TiB) a run accepts.
inline constexpr double kMaxPointBudgetMs = 3.6e6, kMaxMemoryMarginMib = 16777216.0;
// Fills the mode's defaults where an option is 0, then checks every range (ConfigError naming
// the option: "--atol nan: expected a finite number >= 0").
void resolve_defaults(RunOptions& o);
// The timer of one measurement over the whole point budget (the baseline's host-bound probe).
TimerOptions timer_options(const RunOptions& o);
// The timer of block `block` (0-based) of a point: 1/blocks of the budget and of the pairs,
// the floor shared out (block_floor_pairs), the interval target widened by sqrt(blocks) so the
// pooled pairs meet it, and after the first block a lighter warm-up: one candidate run and
// kLaterBlockWarmupMs, no baseline run.
TimerOptions block_timer_options(const RunOptions& o, size_t block);
// Block `block`'s share of a point's floor of pairs, earlier blocks taking the remainder, at
// least 2 so that each block has a median of its own: 5 pairs in two blocks are 3 + 2.
size_t block_floor_pairs(size_t floor_total, size_t blocks, size_t block);
inline constexpr double kLaterBlockWarmupMs = 5.0;

nlohmann::json options_to_json(const RunOptions& o);
// Throws ConfigError naming `source` and the key on a missing or mistyped option.
RunOptions options_from_json(const nlohmann::json& j, const std::string& source);

// Where the files of a run are now, for a run folder resumed from elsewhere (empty: where run.json
// says, as the run was given them).
struct ResumeFiles {
  std::string cases, techniques;
};

// --resume DIR: the options of the run in DIR (everything but the command line and --json
// comes from its run.json, which is returned in doc). Throws ConfigError where DIR is not a
// run folder, run.json is malformed, a file the run read cannot be found from here (naming the
// option that points to its new place), or has changed since (fingerprints).
RunOptions options_for_resume(const std::string& dir, nlohmann::json& doc, const ResumeFiles& moved = {});

}  // namespace tlb
