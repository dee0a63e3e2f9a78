// One result row: what the runner writes for a point and what analysis, reports, the gate and
// the dispatch table read back. points.jsonl is the record; points.csv carries the same
// columns in the same order, both made from one column table (point_row.cpp), so the two files
// and the readers cannot drift apart.
//
// Numbers that are NaN or infinite are written as the strings "nan", "inf", "-inf" in JSON and
// as nan/inf in CSV; a field that does not apply (nothing measured) is null / empty. The case's
// shape is absent from rows of runs older than the shape columns.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.hpp"  // DType, Fp32Math
#include "point_status.hpp"

namespace tlb {

struct PointRow {
  // The case.
  int case_id = 0;
  std::string case_name;
  std::optional<int64_t> batch, seq, d_model, heads, d_ff, layers;
  std::string mask;
  // The point.
  std::string dtype;         // fp16 | bf16 | fp32
  std::string math;          // fp32: the run's fused-path mode (tf32 | ieee); else "fp32-acc"
  std::string config;        // bit string, technique 1 leftmost; "auto" for the dispatcher's point
  std::string config_names;  // "qkv+attn" | "reference" | "auto=attn+norm+graph"
  std::string auto_choice;   // auto rows: the bit string the dispatcher chose; else empty
  std::string policy;        // per-layer E/F string, or "auto"
  PointStatus status;
  std::string baseline;      // config the speedup is against: 00000, or 01000 (see note)
  // Timing (baseline = "ref" side).
  std::optional<double> ref_ms, ref_spread_ms, cand_ms, cand_spread_ms;
  std::optional<double> speedup, speedup_ci_low, speedup_ci_high, speedup_ci_level;
  // The blocks the point was timed in, apart in time, and the relative standard deviation of
  // their median speedups (block_log_sd); the interval above holds that spread as well as the
  // pairs' own (widen_for_blocks).
  std::optional<int64_t> blocks;
  std::optional<double> block_spread;
  // The baseline's eager forward against its own graph replay (point_measure.hpp): host_bound
  // where the replay is faster by more than kHostBoundRatio; ref_graph_ms the replayed time.
  // Every candidate of a host-bound group is also timed replayed from a graph (its own, for a
  // graph configuration) against the replay, which hosts agree on where their launch rates
  // differ: speedup_vs_graph_ref and its interval (same level).
  std::optional<bool> host_bound;
  std::optional<double> ref_graph_ms;
  std::optional<double> speedup_vs_graph_ref, speedup_vs_graph_ref_ci_low, speedup_vs_graph_ref_ci_high;
  std::optional<int64_t> reps, reps_attempted, warmup_runs, throttled_samples;
  std::string stop_reason;   // converged | budget | max_pairs
  std::optional<double> min_mhz, max_mhz;
  std::optional<double> tflops, ref_tflops;
  std::optional<int64_t> peak_bytes, predicted_bytes;
  // Accuracy.
  std::optional<double> max_abs_err, max_rel_err;
  std::optional<int64_t> strict_violations;
  std::optional<bool> strict_pass;
  std::optional<double> golden_rel_l2, golden_rel_l2_ref, golden_threshold;
  std::optional<bool> golden_pass;
  std::optional<int64_t> nan_count, inf_count;
  std::vector<double> layer_rel_l2;  // --layer-trace: candidate vs golden after each layer
  // --stage-times: ms per stage of the layer (CostStage order: ln1, qkv, attn, out_proj, ln2,
  // ffn_up, ffn_down; every layer's summed) from events between the stages of the forward as
  // run, without PDL, less the events' own cost (stage_timing.hpp; median of kStageTimeRuns),
  // and each stage's floor at the run's measured ceilings (stage_costs.hpp).
  std::vector<double> stage_ms, stage_floor_ms;
  // What ran.
  std::string dispatch;          // "qkv=<variant>;attn=<variant>;..."
  std::string fallback_reasons;  // "attn: <why>; ffn: <why>"
  std::string note;              // nonviable/oom/error reason, baseline substitution, auto choice
  std::string timestamp;         // UTC, ISO 8601

  bool is_aa() const { return status == StatusKind::aa; }
  bool is_fallback() const { return status.is_fallback(); }
  // A dispatcher-chosen row: its own row in the matrices, outside the factorial design.
  bool is_auto() const { return policy == "auto" || config == "auto"; }
  // The row a point belongs to in a matrix: the bit string, or "auto".
  const std::string& row_label() const;
  // Timed, with a usable speedup (ok or fallback; a fallback ran and was measured).
  bool measured() const;
  // Half-width of the speedup interval in log space; from the interval when present, else
  // from the two relative spreads; 0 when neither is known.
  double log_halfwidth() const;
  // Half-width of the speedup interval in speedup units (same sources).
  double halfwidth() const;
};

// The math column of fp16 and bf16 rows: their products accumulate in fp32.
inline constexpr const char* kHalfMath = "fp32-acc";
// The math column of a row: an fp32 run's fused-path mode (tf32 | ieee), else kHalfMath.
std::string row_math(DType dtype, Fp32Math fp32_math);

// Column names in file order (shared by CSV and JSONL).
const std::vector<std::string>& point_columns();

nlohmann::json to_json(const PointRow& r);
// Extra keys are ignored; a missing or null field stays empty, except case_id, dtype, config
// and status, which every row has. Throws ConfigError "\"<key>\": <problem>" on a value of the
// wrong type, a dtype other than fp16, bf16 or fp32, or a config that is neither a bit string
// nor "auto"; the caller puts the file and line in front.
PointRow point_from_json(const nlohmann::json& j);

std::string csv_header();
std::string to_csv_line(const PointRow& r);  // no trailing newline
PointRow point_from_csv(const std::vector<std::string>& fields);

}  // namespace tlb
