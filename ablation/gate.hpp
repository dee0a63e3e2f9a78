// The CI gate: checks a results folder against thresholds and lists every violation.
//
// Thresholds file (configs/gates.json):
//   {
//     "$comment": "...",                       // "$..." keys are comments, allowed anywhere
//     "defaults":  { <rules> },                // applies to every point
//     "overrides": [ { <selector>, <rules> }, ... ]
//   }
// An override applies to the points its selector matches; later overrides win over earlier
// ones, and both over "defaults", rule by rule. Selector keys (all optional, absent = all):
//   "cases":   [1, 2, 14] or "1-5,9"          case ids
//   "dtypes":  ["fp16", "bf16"] or "fp16,bf16"
//   "configs": "x1xxx" or ["11xxx", "auto"]   '0'/'1'/'x' per technique, leftmost =
//                                             technique 1; "auto" = the dispatcher's row
// Rules (a number, or null to switch the rule off; built-in default in brackets):
//   per point:
//     "min_speedup"            [off]   speedup of each measured point >= this
//     "max_regression_pct"     [off]   with --baseline: speedup may drop at most this many
//                                      percent below the baseline run's, matched by
//                                      case, dtype and configuration; a larger drop whose
//                                      interval still overlaps the baseline's is counted
//                                      as noise in the summary, not a violation; where
//                                      both runs have speedup_vs_graph_ref (candidate and
//                                      host-bound baseline replayed) that is what is compared
//     "require_golden"         [true]  golden_pass must be true on every measured point
//     "require_strict"         [false] strict_pass must be true on every measured point
//     "allow_nonviable"        [false] status "nonviable" is acceptable
//     "allow_oom"              [false] status "oom" is acceptable
//     "allow_fallback"         [true]  status "fallback:<stage>" is acceptable
//   per case and dtype (not allowed in an override that has "configs"):
//     "min_best_speedup"       [off]   the best configuration passing golden reaches this
//     "max_auto_shortfall_pct" [off]   the auto row is at most this many percent slower than
//                                      the best fixed configuration (when an auto row exists),
//                                      by forward time (results::compare_auto)
//     "require_all_configs"    [true]  every one of the 2^N configurations has a row
// Status "error" and any unknown status are always violations; A/A rows are not gated.
// Before these rules the folder itself is checked (gate_integrity.hpp: run_state, incomplete,
// torn_line, duplicate_point, and the baseline_* rules), and recorded accuracy passes are
// recomputed from each row's numbers.
// Each violation names its rule by the key above (or "error", "status", "speedup_missing",
// "no_points"), so the line says which knob a deliberate change would have to move.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results_reader.hpp"

namespace tlb::gate {

// A numeric rule as written in one layer: not mentioned, null (off), or a value.
struct Limit {
  bool set = false;
  std::optional<double> value;
};

struct RuleLayer {
  Limit min_speedup, max_regression_pct, min_best_speedup, max_auto_shortfall_pct;
  std::optional<bool> require_golden, require_strict, allow_nonviable, allow_oom, allow_fallback,
      require_all_configs;
};

struct Selector {
  std::vector<int> case_ids;                 // empty: all
  std::vector<std::string> dtypes;           // empty: all
  std::vector<std::string> config_patterns;  // empty: all
};

struct Override {
  std::string path;  // JSON path for messages, e.g. "$.overrides[2]"
  Selector selector;
  RuleLayer rules;
};

struct Thresholds {
  std::string source;
  RuleLayer defaults;
  std::vector<Override> overrides;
};

// The rules in force for one point or one (case, dtype).
struct EffectiveRules {
  std::optional<double> min_speedup, max_regression_pct, min_best_speedup, max_auto_shortfall_pct;
  bool require_golden = true, require_strict = false, allow_nonviable = false, allow_oom = false,
       allow_fallback = true, require_all_configs = true;
};

// Throws tlb::ConfigError("<source>: <json path>: <problem>") on bad JSON, unknown keys, wrong
// types, malformed selectors or out-of-range limits.
Thresholds parse_thresholds(std::string_view text, const std::string& source);
Thresholds load_thresholds(const std::string& path);

// `config` is a row label (bit string or "auto"); empty = a per-(case, dtype) lookup, which
// only overrides without "configs" take part in.
EffectiveRules rules_for(const Thresholds& t, int case_id, const std::string& dtype,
                         const std::string& config);

struct Violation {
  int case_id = 0;
  std::string case_name;
  std::string dtype;
  std::string config;  // row label; empty for per-(case, dtype) rules
  std::string rule;
  std::string measured;
  std::string limit;
};

struct GateReport {
  std::vector<Violation> violations;
  int points = 0, measured = 0, allowed_unmeasured = 0, aa_points = 0;
  int cases = 0, groups = 0;
  int compared = 0, baseline_unmatched = 0;  // with a baseline run
  int regressions_within_noise = 0;          // past max_regression_pct, intervals overlapping
  int compared_on_replay = 0;   // of `compared`: both on the speedup against the graph-replayed baseline
  int replayed_in_one_run = 0;  // of `compared`: that speedup in one run only (compared eagerly)
  double worst_change_pct = 0;               // most negative speedup change vs baseline
  // Of the compared points whose baseline row has an interval, how many speedups (the
  // figure compared) fall inside it: how well one run's intervals describe the next.
  int with_baseline_interval = 0, inside_baseline_interval = 0;
  bool passed() const { return violations.empty(); }
};

// Checks `results` (and, when given, regression against `baseline`). Throws ConfigError when
// the thresholds do not fit the results (a pattern of the wrong length).
GateReport run_gate(const Thresholds& t, const results::Results& results,
                    const results::Results* baseline);

// The violation table and a closing line, or the one-line pass summary.
void print_report(const GateReport& r, std::FILE* out);
std::string report_json(const GateReport& r);

}  // namespace tlb::gate
