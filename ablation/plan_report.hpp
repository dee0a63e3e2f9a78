// What a run would do before it does it: per case and dtype the memory each path needs, which
// baseline a point is timed against, which points fit the memory budget, and a time estimate.
// `tlbench plan` prints this; the runner calls assess_point() to decide viability with the
// very same numbers, so a point the plan calls viable is the point the runner attempts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "dispatch_table.hpp"
#include "grid.hpp"
#include "stack/memory_plan.hpp"

namespace tlb {

constexpr double kDefaultMemGiB = 80.0;
// What --mem-gib accepts: 1 MiB up to a budget far beyond any device.
constexpr double kMinMemGiB = 1.0 / 1024, kMaxMemGiB = 1e9;

// The device memory a run may use.
struct MemoryBudget {
  uint64_t bytes = 0;
  bool from_device = false;  // measured free memory of a present CUDA device
  std::string source;        // e.g. "free memory of device 0 (NVIDIA H200)", "assumed (--mem-gib 80)"
};

// An explicit `mem_gib` wins; else the free memory of CUDA device 0 when one is present (its
// context is created to ask); else kDefaultMemGiB, marked as an assumption.
MemoryBudget resolve_memory_budget(std::optional<double> mem_gib);
// Budget of exactly `mem_gib` GiB, no device query (tests, --mem-gib).
MemoryBudget fixed_memory_budget(double mem_gib, const std::string& source);

// The run options that change what a path allocates. Defaults match `tlbench run`'s.
struct PathMemoryOptions {
  Fp32Math fp32_math = Fp32Math::tf32;  // the fused path's fp32 mode (the reference is ieee)
  bool keep_layer_outputs = false;      // per-layer error trace: the candidate keeps every
                                        // layer's output (the baseline does not)
};

// Bytes one path needs when it runs alone: data + its workspace + one cuBLAS workspace.
uint64_t path_peak_bytes(const LayerShape& s, DType dtype, const StageSwitch& stages,
                         const std::string& policy, const PathMemoryOptions& opt = {});

// What a point is timed against. The reference (all stages off) when data + reference fit
// the budget; else the attn-only configuration (no dense scores buffer), and `reason` says so.
struct BaselineChoice {
  StageSwitch stages;             // all off, or attn only
  bool is_reference = true;
  uint64_t reference_peak = 0;    // path_peak_bytes of the reference
  std::string reason;             // empty for the reference
};
BaselineChoice choose_baseline(const CaseSpec& c, DType dtype, uint64_t budget_bytes,
                               const PathMemoryOptions& opt = {});

struct PointViability {
  bool viable = false;
  BaselineChoice baseline;
  uint64_t peak_bytes = 0;        // data + baseline and candidate workspaces + two cuBLAS
                                  // workspaces (point_peak_bytes with default options)
  uint64_t budget_bytes = 0;
  std::string reason;             // why not viable; empty when viable
};
// The runner's and the plan's viability decision for one (case, dtype, configuration). The
// candidate runs under the case's policy ("auto" is planned as all 'F').
PointViability assess_point(const CaseSpec& c, DType dtype, const StageSwitch& candidate,
                            uint64_t budget_bytes, const PathMemoryOptions& opt = {});

// Assumptions of the time estimate (a model, not a measurement; printed with the estimate).
struct TimeModel {
  double fused_tflops[kNumDTypes] = {400.0, 400.0, 150.0};      // fp32: tf32 tensor cores
  double fused_fp32_ieee_tflops = 40.0;                         // fp32 with --fp32-math ieee
  double reference_tflops[kNumDTypes] = {250.0, 250.0, 40.0};   // fp32: IEEE FMA
  double golden_tflops = 40.0;                                  // fp32 IEEE
  double memory_tb_per_s = 3.0;          // scores and elementwise traffic
  double launch_us = 4.0;                // per kernel launch on a stream
  double graph_launch_us = 1.0;          // per kernel inside a replayed graph
  int reference_launches_per_layer = 16;
  int fused_launches_per_layer = 6;
  // The runner's timer (runner.hpp, mode_defaults, block_timer_options): a point in `blocks`
  // blocks, the first after the accuracy check's run with the candidate warmed up for >=
  // warmup_s and >= warmup_min_runs runs (that one counted), each later one built anew with a
  // lighter warm-up, then ABBA pairs until the block's share of the budget (warm-up included)
  // is spent, never fewer than its share of floor_pairs nor more than of max_pairs.
  double warmup_s = 0.025;
  int warmup_min_runs = 3;
  double point_time_budget_s = 0.1;
  int floor_pairs = 5;
  int max_pairs = 2000;
  int blocks = 2;
  double point_setup_s = 0.010;          // building a configuration, capturing a graph
  double case_setup_s = 0.050;           // generating data on the device
};
// Model seconds of one point: its blocks' setup, warm-up and pairs, t_base and t_cand a
// forward of the baseline and of the candidate.
double estimated_point_seconds(const TimeModel& model, double t_base, double t_cand);
// Model seconds of one forward of `stages` (all off = reference).
double estimated_forward_seconds(const LayerShape& s, DType dtype, const StageSwitch& stages,
                                 const TimeModel& m = {}, Fp32Math fp32_math = Fp32Math::tf32);

struct DTypePlan {
  DType dtype = DType::fp16;
  uint64_t weights_bytes = 0;
  uint64_t input_bytes = 0;
  uint64_t activation_bytes = 0;  // reference workspace without the scores buffer
  CaseMemory memory;              // data, scores, reference workspace, golden peak
  uint64_t reference_peak = 0;    // path_peak_bytes, reference alone
  uint64_t fused_peak = 0;        // path_peak_bytes, every technique of the set on
  uint64_t golden_peak = 0;
  bool reference_viable = false;
  bool fused_viable = false;
  bool golden_viable = false;
  BaselineChoice baseline;
  // The techniques whose kernels cannot run this shape (their stage runs the reference's
  // kernels in every configuration that switches them on, and the row says why).
  std::vector<StageFallback> fallbacks;
  int selected_points = 0;        // points of this (case, dtype) in the grid
  int viable_points = 0;
  int nonviable_points = 0;
  int nonviable_with_attn = 0;    // nonviable points whose configuration has attn on
  std::vector<uint32_t> order;    // the fixed configurations in their seeded order
  std::vector<uint32_t> nonviable_configs;
  // The auto point, where the group has one: its place in the seeded order (before order[i])
  // and the configuration the dispatch table picks for it.
  bool has_auto = false;
  size_t auto_position = 0;
  AutoConfig auto_choice;
  bool auto_viable = false;
  double estimated_seconds = 0;
};

struct CasePlan {
  const CaseSpec* spec = nullptr;
  double forward_flops = 0;
  std::vector<DTypePlan> dtypes;  // the dtypes selected for this case, fp16, bf16, fp32 order
};

struct Plan {
  std::string cases_source, techniques_source;
  std::vector<std::string> technique_names;
  uint32_t configs_selected = 0;  // fixed configurations per (case, dtype) after --configs
  std::string narrowed;           // why fewer configurations than --configs says (--quick)
  int auto_points = 0;            // dispatcher's points (config "auto") among total_points
  std::string dispatch_origin;    // the table they are chosen from; empty without auto points
  uint64_t seed = 0;
  MemoryBudget budget;
  PathMemoryOptions paths;
  TimeModel model;
  std::vector<CasePlan> cases;
  size_t total_points = 0;
  int points_per_dtype[kNumDTypes] = {0, 0, 0};
  int viable_per_dtype[kNumDTypes] = {0, 0, 0};
  int nonviable_per_dtype[kNumDTypes] = {0, 0, 0};
  double estimated_seconds = 0;
};

// Auto points take their configuration from `dispatch`, or the built-in table when null.
Plan make_plan(const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
               uint64_t seed, const MemoryBudget& budget, const PathMemoryOptions& paths = {},
               const TimeModel& model = {}, const DispatchTable* dispatch = nullptr);

// Human tables (fmt) and the --json document.
void print_plan(const Plan& plan, std::FILE* out);
std::string plan_json(const Plan& plan);

}  // namespace tlb
