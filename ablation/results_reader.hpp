// Reading a results folder back: `points.jsonl` (one JSON object per measured point, appended
// as the runner goes) and `run.json` (provenance and the technique order). Analysis, reports
// and the gate work from this alone, so any old run can be re-analysed without a GPU.
//
// The contract: every line of points.jsonl is an object with these keys among the columns of
// point_row.hpp (extra keys are ignored; numeric fields may be absent or null where nothing
// was measured, e.g. nonviable):
//   "case_id"            int      case id from cases.json
//   "case_name"          string
//   "dtype"              string   "fp16" | "bf16" | "fp32"
//   "math"               string   "tf32" | "ieee" (fp32 math mode of the candidate)
//   "config"             string   bit string over the techniques, leftmost = technique 1
//                                 ("11000"); "auto" for the dispatcher's own choice
//   "config_names"       string   "qkv+attn", or "reference" for all zeros
//   "policy"             string   per-layer E/F string, or "auto"
//   "status"             string   "ok" | "nonviable" | "oom" | "fallback:<stage>" | "error" |
//                                 "aa" (A/A noise-floor row: reference against itself)
//   "baseline"           string   what the speedup is against: "00000" (the reference) or
//                                 "01000" (attn only, where the dense reference cannot fit)
//   "ref_ms", "cand_ms"                     median forward time of baseline and candidate
//   "ref_spread_ms", "cand_spread_ms"       their spreads
//   "speedup"                               median of paired ratios t_ref / t_cand
//   "speedup_ci_low", "speedup_ci_high"     its interval (the spread between blocks included)
//   "speedup_ci_level"   number   optional: the interval's confidence (0.95)
//   "blocks"             int      optional: blocks the point was timed in, apart in time
//   "block_spread"       number   optional: relative sd of the blocks' median speedups
//   "host_bound"         bool     optional: the eager baseline slower than its graph replay
//                                 by over 1.05x (point_measure.hpp); "ref_graph_ms" its replay
//   "speedup_vs_graph_ref", "speedup_vs_graph_ref_ci_low", "speedup_vs_graph_ref_ci_high"
//                                 optional: a candidate of a host-bound group replayed
//                                 from a graph against the replayed baseline, with its
//                                 interval
//   "reps"               int      timed pairs
//   "tflops"             number   achieved by the candidate
//   "peak_bytes"         int      device memory peak of the point
//   "strict_pass", "golden_pass"            bool accuracy verdicts (docs/design.md §3)
//   "golden_rel_l2", "golden_rel_l2_ref"    relative L2 error vs golden: candidate, reference
//   "golden_threshold"   number   optional: the error golden_pass was judged against
//   "max_abs_err", "max_rel_err"            vs the same-dtype reference output
//   "nan_count", "inf_count"                int, in the candidate output
//   "batch", "seq", "d_model", "heads", "d_ff", "layers"   int, optional: the case's shape
//   "mask"               string   optional: "none" | "causal" | "padding"
//   "dispatch"           string   optional: kernel variant per stage ("qkv=...;attn=...")
//   "auto_choice"        string   optional, auto rows: the configuration the dispatcher chose
// run.json must hold "techniques": the technique names in bit order (strings, or objects with
// a "name"). Without run.json they are recovered from single-technique rows' config_names.
// A point written twice counts once (the later line wins) and is recorded in `duplicates`: a
// finished or resumed run writes each point once, so the gate fails on it. Every column the
// row codec knows is type-checked, not only the ones above.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "point_row.hpp"

namespace tlb::results {

// A row as the reader hands it on: the one row type, and where it stands.
struct Point : PointRow {
  Point() = default;
  // A row not read from a file (the runner's own): line 0, its dtype as its group.
  explicit Point(PointRow row) : PointRow(std::move(row)), group(dtype) {}

  int line = 0;  // 1-based line in points.jsonl
  // Set by the reader: the dtype group the point is analysed in. "fp16", "bf16", "fp32";
  // "fp32-tf32"/"fp32-ieee" only when one folder holds fp32 points of both math modes.
  std::string group;
};

// The auto row against the best fixed configuration of its (case, dtype). What is judged is
// auto's choice: where the fixed row of the configuration it chose is given (`chosen`), that
// row is compared with the best's, both measured the same way in the same sweep; the auto row
// itself is that configuration measured once more, and what separates the two (up to ~6 % of
// forward time on power-capped cases of the H200) is measurement noise. Rows are compared by
// their own forward time where both have one: each speedup also carries its own measurement
// of the baseline, whose noise (large for a launch-bound eager reference) has nothing to do
// with the choice. Without times, by speedup.
struct AutoVsBest {
  double shortfall_pct = 0;  // how much slower the choice is (negative: faster)
  bool within_noise = false; // same configuration, or the two intervals (time: median -+ spread) meet
  bool same_config = false;  // auto chose the best configuration
  bool by_choice = false;    // judged on the chosen configuration's fixed row (else the auto row)
  bool by_time = false;      // compared by cand_ms (else by speedup)
};
AutoVsBest compare_auto(const Point& automatic, const Point& best, const Point* chosen = nullptr);

struct Results {
  std::string dir;
  std::vector<std::string> techniques;  // bit order
  std::string techniques_source;        // "run.json", or how they were recovered
  nlohmann::json run = nlohmann::json::object();  // run.json as read; {} when absent
  std::vector<Point> points;            // file order, duplicates resolved
  std::vector<std::string> warnings;    // e.g. a torn last line, replaced duplicates
  // What the warnings say, as data for the gate: the line of a torn last write (0: none),
  // and each point written twice (the later line replaced the earlier one).
  int torn_line = 0;
  struct Duplicate {
    int line = 0, replaced_line = 0;
    size_t point = 0;  // index in `points`
  };
  std::vector<Duplicate> duplicates;
  int num_techniques() const { return static_cast<int>(techniques.size()); }
  // The device the run measured on, when run.json says (best effort; "" otherwise).
  std::string device_name() const;
};

// A point's identity in a folder and across runs: case, dtype, fp32 math mode, row label, A/A.
using PointKey = std::tuple<int, std::string, std::string, std::string, bool>;
PointKey point_key(const Point& p);

// Reads DIR/points.jsonl and DIR/run.json (optional). Throws tlb::ConfigError with one line
// naming the file, line and field on anything malformed. A last line without its newline that
// does not parse is a write torn by a crash: it is dropped with a warning.
Results read_results(const std::string& dir);

// The same from text (tests). `run_json` empty = no run.json.
Results parse_results(std::string_view points_jsonl, std::string_view run_json,
                      const std::string& dir);

}  // namespace tlb::results
