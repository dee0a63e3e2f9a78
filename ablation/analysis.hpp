// What a sweep says, per dtype: the speedup matrix (configurations x cases), the best
// configuration per case, and what each technique buys across the factorial design.
//
// Effects are computed on log-speedup, where the techniques' gains multiply:
//   main effect of A      = mean(ln s | A on) - mean(ln s | A off)
//   interaction of A and B = half the difference of A's effect at B on and at B off
// (the standard 2^k contrasts), over the cases where every configuration was measured against
// the reference; other cases are listed as excluded with the reason. exp(effect) is the
// geometric-mean speedup ratio with the technique vs without it.
//
// Intervals come from the measured spreads only: each point's speedup interval, taken in log
// space, contributes its half-width as if it were a standard error, and the half-widths of
// independent points combine as for a mean (square root of the sum of squared, weighted
// half-widths). An effect's interval thus has the confidence level of the per-point intervals
// and covers measurement noise, not the variation between cases or configurations.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "results_reader.hpp"

namespace tlb::analysis {

using results::Point;
using results::Results;

struct MatrixRow {
  std::string label;  // bit string, or "auto"
  std::string names;  // "qkv+attn", "reference", "auto"
  int config = -1;    // config index (MSB = technique 1); -1 for auto
};

// A baseline of all zeros, or none recorded: the speedup is against the reference.
inline bool is_reference_baseline(const std::string& baseline) {
  return baseline.empty() || baseline.find_first_not_of('0') == std::string::npos;
}

struct MatrixCol {
  int case_id = 0;
  std::string case_name;
  std::string baseline;  // "00000", or "01000" when the dense reference could not run
};

struct Cell {
  std::optional<Point> point;  // empty: this configuration was not run for this case
  bool measured() const { return point && point->measured(); }
  // "ok", "nonviable", "fallback:attn", ..., or "missing" when not run.
  std::string status() const { return point ? point->status.str() : "missing"; }
};

struct BestEntry {
  int case_id = 0;
  std::string case_name;
  std::string baseline;
  std::optional<Point> best;  // highest speedup among measured rows that pass golden
  int within_noise = 0;       // other configurations whose interval reaches the best's
  std::optional<Point> auto_point;
  std::optional<Point> auto_chosen;  // the fixed row of the configuration auto chose
  std::string note;           // why there is no best, when there is none
};

struct Interval {
  double value = 0, low = 0, high = 0;
};

struct TechniqueEffect {
  std::string technique;
  int bit = 0;  // 1-based, leftmost = 1
  int n_on = 0, n_off = 0;
  Interval mean_on, mean_off;        // arithmetic mean speedup
  Interval geomean_on, geomean_off;  // exp(mean ln s)
  double effect_log = 0;             // main effect on ln speedup
  double effect_halfwidth = 0;       // in log space
  Interval ratio;                    // exp(effect_log +- effect_halfwidth)
};

struct InteractionEffect {
  std::string a, b;
  double effect_log = 0;
  double effect_halfwidth = 0;
  Interval ratio;
};

struct ExcludedCase {
  int case_id = 0;
  std::string case_name;
  std::string reason;
};

struct CaseEffects {
  int case_id = 0;
  std::string case_name;
  std::vector<TechniqueEffect> effects;
};

struct Factorial {
  std::vector<int> cases_used;
  std::vector<ExcludedCase> cases_excluded;
  std::vector<TechniqueEffect> effects;           // over every used case
  std::vector<InteractionEffect> interactions;    // every pair, in bit order
  std::vector<CaseEffects> by_case;               // main effects within each used case
  std::string note;                               // why nothing was computed, if so
};

struct DTypeAnalysis {
  std::string group;  // "fp16", "bf16", "fp32" (or "fp32-tf32"/"fp32-ieee" when mixed)
  std::string dtype, math;
  std::vector<std::string> techniques;
  std::vector<MatrixRow> rows;
  std::vector<MatrixCol> cols;
  std::vector<std::vector<Cell>> cells;  // [row][col]
  std::vector<BestEntry> best;           // one per column
  Factorial factorial;
  int points = 0, measured = 0, aa_points = 0;
  std::optional<double> ci_level;  // confidence of the points' intervals, when they all agree
  std::vector<std::string> notes;
};

struct Analysis {
  std::string source_dir;
  std::vector<std::string> techniques;
  std::string device;
  std::vector<DTypeAnalysis> groups;  // fp16, bf16, fp32 order
  std::vector<std::string> warnings;  // from reading
};

Analysis analyze(const Results& results);

// The factorial contrasts over a full 2^N grid of log-speedups. `log_speedup[c][k]` and
// `log_halfwidth[c][k]` for case c and config index k (MSB = technique 1); every case must
// hold all 2^N values. Also fills the arithmetic on/off means from `speedup`/`halfwidth`.
struct FactorialInput {
  std::vector<std::vector<double>> speedup, halfwidth, log_speedup, log_halfwidth;
};
std::vector<TechniqueEffect> main_effects(const FactorialInput& in,
                                          const std::vector<std::string>& techniques);
std::vector<InteractionEffect> interactions(const FactorialInput& in,
                                            const std::vector<std::string>& techniques);

// Writes every file of the analysis into `out_dir` (created if needed) and returns their
// names: analysis.json, and per group matrix_<g>.csv, heatmap_<g>.json, effects_<g>.csv,
// effects_<g>.json, interactions_<g>.csv, best_<g>.csv; and the (name, content) files of
// `also` beside them. All or none: a target that cannot take its file stops the whole set.
std::vector<std::string> write_analysis(const Analysis& a, const std::string& out_dir,
                                        const std::vector<std::pair<std::string, std::string>>& also = {});

// A short table per dtype: best configuration per case with speedup and accuracy, then the
// technique effects in one line each.
void print_summary(const Analysis& a, std::FILE* out);
// The same as JSON (for --json).
std::string summary_json(const Analysis& a);

}  // namespace tlb::analysis
