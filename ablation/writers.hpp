// Result files of a run (docs/design.md §6): points.jsonl and points.csv get one row per point
// the moment it is measured, flushed and fsync'ed, so a crash or a kernel fault loses nothing;
// run.json is replaced atomically (temporary file + rename), so it is always whole.
//
// points.jsonl is the record; points.csv carries the same columns in the same order. Numbers
// that are NaN or infinite are written as the strings "nan", "inf", "-inf" in JSON and as
// nan/inf in CSV; a field that does not apply (nothing measured) is null / empty.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "output_files.hpp"  // write_file_atomic

namespace tlb {

struct PointRow {
  // The case.
  int case_id = 0;
  std::string case_name;
  int64_t batch = 0, seq = 0, d_model = 0, heads = 0, d_ff = 0, layers = 0;
  std::string mask;
  // The point.
  std::string dtype;         // fp16 | bf16 | fp32
  std::string math;          // fp32: the run's fused-path mode (tf32 | ieee); else "fp32-acc"
  std::string config;        // bit string, technique 1 leftmost; "auto" for the dispatcher's point
  std::string config_names;  // "qkv+attn" | "reference" | "auto=attn+norm+graph"
  std::string auto_choice;   // auto rows: the bit string the dispatcher chose; else empty
  std::string policy;        // per-layer E/F string
  std::string status;        // ok | nonviable | oom | fallback:<stage>[,<stage>] | error | aa
  std::string baseline;      // config the speedup is against: 00000, or 01000 (see note)
  // Timing (baseline = "ref" side).
  std::optional<double> ref_ms, ref_spread_ms, cand_ms, cand_spread_ms;
  std::optional<double> speedup, speedup_ci_low, speedup_ci_high, speedup_ci_level;
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
  // What ran.
  std::string dispatch;          // "qkv=<variant>;attn=<variant>;..."
  std::string fallback_reasons;  // "attn: <why>; ffn: <why>"
  std::string note;              // nonviable/oom/error reason, baseline substitution, auto choice
  std::string timestamp;         // UTC, ISO 8601
};

// Column names in file order (shared by CSV and JSONL).
const std::vector<std::string>& point_columns();

nlohmann::json to_json(const PointRow& r);
// Throws std::runtime_error naming the key on a value of the wrong type.
PointRow point_from_json(const nlohmann::json& j);

std::string csv_header();
std::string to_csv_line(const PointRow& r);  // no trailing newline
// One CSV record split into fields (RFC 4180 quoting).
std::vector<std::string> split_csv_line(std::string_view line);
PointRow point_from_csv(const std::vector<std::string>& fields);

// Reads points.jsonl. A last line without its newline (cut off mid-write) is ignored and
// reported in `warnings`; any other malformed line throws std::runtime_error with its number.
std::vector<PointRow> read_points_jsonl(const std::string& path,
                                        std::vector<std::string>* warnings = nullptr);

// Appends rows to DIR/points.jsonl and DIR/points.csv. Opening an existing folder (resume)
// first cuts a partial last line off points.jsonl and rewrites points.csv from it, so the two
// files always hold the same rows.
class PointWriter {
 public:
  explicit PointWriter(const std::string& dir);
  ~PointWriter();
  PointWriter(const PointWriter&) = delete;
  PointWriter& operator=(const PointWriter&) = delete;
  // Rows already on disk when the writer opened.
  const std::vector<PointRow>& existing() const { return existing_; }
  // Writes both lines, then fflush + fsync: the row survives a crash from here on.
  void append(const PointRow& r);

 private:
  std::string dir_;
  std::FILE* jsonl_ = nullptr;
  std::FILE* csv_ = nullptr;
  std::vector<PointRow> existing_;
};


// UTC now as 2026-11-29T12:19:27Z.
std::string utc_timestamp();
// The current UTC time through strftime's `format`.
std::string utc_now(const char* format);

}  // namespace tlb
