// The plan: memory per path from the stack's own layouts (memory_plan), viability of every
// selected point under the budget, and a modelled time estimate. Printing is kept apart from
// the computation so the runner can reuse assess_point() without the tables.
#include "plan_report.hpp"

#include <cuda_runtime.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "config_bits.hpp"
#include "run_options.hpp"
#include "stack/stage_costs.hpp"
#include "text.hpp"

namespace tlb {

double estimated_point_seconds(const TimeModel& model, double t_base, double t_cand) {
  const int blocks = std::max(model.blocks, 1);
  const double budget = model.point_time_budget_s / blocks;
  double seconds = 0;
  for (int b = 0; b < blocks; ++b) {
    // As the runner times them (point_measure's block_timer): the first block after the
    // accuracy check's run, untimed but counted toward the warm-up runs (at least one timed run
    // follows it), and without a baseline run (a group whose baseline no host probe has timed
    // makes one at its first point; the model leaves it out).
    const double accuracy_run = b == 0 ? t_cand : 0;
    const double warmup = b == 0 ? std::max(model.warmup_s, std::max(model.warmup_min_runs - 1, 1) * t_cand)
                                 : std::max(std::min(model.warmup_s, kLaterBlockWarmupMs * 1e-3), t_cand);
    const auto floor_pairs = static_cast<double>(
        block_floor_pairs(static_cast<size_t>(model.floor_pairs), static_cast<size_t>(blocks), static_cast<size_t>(b)));
    const double pairs = std::clamp((budget - warmup) / (t_base + t_cand), floor_pairs,
                                    std::max(static_cast<double>(model.max_pairs / blocks), 1.0));
    seconds += model.point_setup_s + accuracy_run + warmup + std::ceil(pairs) * (t_base + t_cand);
  }
  return seconds;
}
namespace {


std::string human_seconds(double s) {
  if (s >= 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 60) return fmt::format("{:.1f} min", s / 60);
  if (s >= 1) return fmt::format("{:.1f} s", s);
  return fmt::format("{:.0f} ms", s * 1e3);
}

uint64_t buffer_bytes(const std::vector<BufferSpec>& layout, const std::string& name) {
  for (const auto& b : layout)
    if (b.name == name) return b.bytes;
  return 0;
}

StageSwitch attn_only() {
  StageSwitch s;
  s[Stage::attn] = true;
  return s;
}

// "auto" is the dispatcher's choice at run time; memory is planned for its widest form, all F.
std::string memory_policy(const std::string& policy) { return policy == "auto" ? "" : policy; }


}  // namespace

MemoryBudget fixed_memory_budget(double mem_gib, const std::string& source) {
  // Below 1 MiB nothing fits (the budget would print as "0 B"); above 1e9 GiB no machine exists.
  if (!(mem_gib >= kMinMemGiB && mem_gib <= kMaxMemGiB))
    throw ConfigError(fmt::format("--mem-gib: expected a positive number of GiB in [{}, {:g}], got {}",
                                  kMinMemGiB, kMaxMemGiB, mem_gib));
  MemoryBudget b;
  b.bytes = static_cast<uint64_t>(mem_gib * kBytesPerGiB);
  b.source = source;
  return b;
}

MemoryBudget resolve_memory_budget(std::optional<double> mem_gib) {
  if (mem_gib) return fixed_memory_budget(*mem_gib, fmt::format("--mem-gib {}", *mem_gib));
  int count = 0;
  // Without a driver or device these calls fail quickly; that is the no-GPU case, not an error.
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaDeviceProp prop{};
    if (cudaSetDevice(0) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess &&
        cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
      MemoryBudget b;
      b.bytes = free_bytes;
      b.from_device = true;
      b.source = fmt::format("free memory of CUDA device 0 ({}, {:.1f} GiB total)", prop.name,
                             static_cast<double>(total_bytes) / kBytesPerGiB);
      return b;
    }
  }
  cudaGetLastError();
  return fixed_memory_budget(
      kDefaultMemGiB,
      fmt::format("assumed: no CUDA device found; default --mem-gib {}", kDefaultMemGiB));
}

uint64_t path_peak_bytes(const LayerShape& s, DType dtype, const StageSwitch& stages,
                         const std::string& policy, const PathMemoryOptions& opt) {
  return aligned_total_bytes(data_layout(s, dtype)) +
         aligned_total_bytes(workspace_layout(s, dtype, stages, memory_policy(policy), false,
                                              opt.keep_layer_outputs, opt.fp32_math)) +
         kCublasWorkspaceBytes;
}

BaselineChoice choose_baseline(const CaseSpec& c, DType dtype, uint64_t budget_bytes,
                               const PathMemoryOptions& opt) {
  BaselineChoice b;
  // The baseline never keeps layer outputs; only the candidate's trace is compared.
  const PathMemoryOptions baseline_opt{opt.fp32_math, false};
  b.reference_peak = path_peak_bytes(c.shape, dtype, StageSwitch{}, "", baseline_opt);
  if (b.reference_peak <= budget_bytes) return b;
  b.is_reference = false;
  b.stages = attn_only();
  b.reason = fmt::format(
      "reference needs {} (dense scores {}) > budget {}; points are timed against attn-only",
      human_bytes(b.reference_peak), human_bytes(case_memory(c.shape, dtype).scores),
      human_bytes(budget_bytes));
  std::vector<std::string> notes;
  if (!effective_stages(c.shape, dtype, b.stages, &notes, opt.fp32_math)[Stage::attn])
    b.reason += fmt::format(", but {} (falls back to the dense reference)",
                            notes.empty() ? std::string("attn is unsupported") : notes.front());
  return b;
}

PointViability assess_point(const CaseSpec& c, DType dtype, const StageSwitch& candidate,
                            uint64_t budget_bytes, const PathMemoryOptions& opt) {
  PointViability v;
  v.budget_bytes = budget_bytes;
  v.baseline = choose_baseline(c, dtype, budget_bytes, opt);
  v.peak_bytes = point_peak_bytes(c.shape, dtype, v.baseline.stages, candidate, memory_policy(c.policy),
                                  opt.fp32_math, opt.keep_layer_outputs);
  v.viable = v.peak_bytes <= budget_bytes;
  if (!v.viable) {
    v.reason = fmt::format("needs {} (data, {} baseline and candidate workspaces, cuBLAS) > budget {}",
                           human_bytes(v.peak_bytes), stage_names(v.baseline.stages),
                           human_bytes(budget_bytes));
    if (!candidate[Stage::attn] && case_memory(c.shape, dtype).scores > budget_bytes)
      v.reason += fmt::format("; the dense scores buffer alone is {}",
                              human_bytes(case_memory(c.shape, dtype).scores));
  }
  return v;
}

ForwardTimes estimated_forward_times(const LayerShape& s, DType dtype, const StageSwitch& stages,
                                     const TimeModel& m, Fp32Math fp32_math) {
  const int di = static_cast<int>(dtype);
  const double T = static_cast<double>(s.tokens()), d = static_cast<double>(s.d_model);
  const double f = static_cast<double>(s.d_ff), S = static_cast<double>(s.seq);
  const double B = static_cast<double>(s.batch), H = static_cast<double>(s.heads);
  const double e = dtype_bytes(dtype);
  const double bw = m.memory_tb_per_s * 1e12;
  const StageSwitch eff = effective_stages(s, dtype, stages, nullptr, fp32_math);
  const bool ieee = dtype == DType::fp32 && fp32_math == Fp32Math::ieee;
  const double fused_rate = ieee ? m.fused_fp32_ieee_tflops : m.fused_tflops[di];
  const double attention_rate = (ieee ? m.fused_fp32_ieee_attention_tflops : m.fused_attention_tflops[di]) * 1e12;
  auto rate = [&](bool fused) { return (fused ? fused_rate : m.reference_tflops[di]) * 1e12; };

  const double qkv = 2 * T * 3 * d * d, out_proj = 2 * T * d * d, ffn = 4 * T * d * f;
  double attn = 4 * B * S * S * d;
  if (s.mask == MaskKind::causal) attn *= 0.5;
  // The reference writes the fp32 scores, the softmax reads them and writes the probabilities
  // in the dtype, P.V reads those.
  const double scores_traffic = B * H * S * S * (2 * 4 + 2 * e);
  // Bias, residual, LayerNorm and GELU passes over [tokens, d] (d_ff for GELU) rows.
  const double elementwise_ref = (10 * T * d + 2 * T * f) * e, elementwise_fused = 4 * T * d * e;

  // With attn the out-projection is the technique's: our GEMM, or cuBLAS in the fused path's
  // math (TF32 for fp32 unless IEEE is asked for; fp16/bf16 at the reference's rate).
  const bool out_proj_fused = out_projection_fused(s, dtype, eff, fp32_math) ||
                              (eff[Stage::attn] && dtype == DType::fp32 && fp32_math == Fp32Math::tf32);
  double layer = qkv / rate(eff[Stage::qkv]) + out_proj / rate(out_proj_fused) + ffn / rate(eff[Stage::ffn]);
  layer += eff[Stage::attn] ? attn / attention_rate : attn / rate(false) + scores_traffic / bw;
  layer += (eff[Stage::norm] ? elementwise_fused : elementwise_ref) / bw;
  const double launches = eff.any_kernel() ? m.fused_launches_per_layer : m.reference_launches_per_layer;
  const double layers = static_cast<double>(s.layers);
  ForwardTimes t;
  t.graph = eff[Stage::graph];
  t.replayed = layers * (layer + launches * m.graph_launch_us * 1e-6);
  const double host = layers * launches * m.launch_us * 1e-6;
  t.eager = std::max(t.replayed, host) + m.launch_overlap_loss * std::min(t.replayed, host);
  return t;
}

double estimated_forward_seconds(const LayerShape& s, DType dtype, const StageSwitch& stages, const TimeModel& m,
                                 Fp32Math fp32_math) {
  return estimated_forward_times(s, dtype, stages, m, fp32_math).as_run();
}

namespace {

// What every point of a plan is judged and timed with.
struct PlanInputs {
  const TechniqueSet& techniques;
  const MemoryBudget& budget;
  const PathMemoryOptions& paths;
  const TimeModel& model;
  const DispatchTable* dispatch;  // for auto points
};

// A (case, dtype)'s memory: its data, the reference, fused and golden peaks against the budget,
// and the baseline its points are timed against; its setup and golden time.
DTypePlan dtype_plan(const CaseSpec& cs, DType dtype, const PlanInputs& in) {
  const LayerShape& s = cs.shape;
  const PathMemoryOptions& paths = in.paths;
  const uint64_t budget = in.budget.bytes;
  DTypePlan dp;
  dp.dtype = dtype;
  const std::vector<BufferSpec> data = data_layout(s, dp.dtype);
  const std::vector<BufferSpec> ref_ws =
      workspace_layout(s, dp.dtype, StageSwitch{}, "", false, false, paths.fp32_math);
  dp.weights_bytes = buffer_bytes(data, "weights");
  dp.input_bytes = buffer_bytes(data, "input");
  dp.memory = case_memory(s, dp.dtype);
  dp.activation_bytes =
      total_bytes(ref_ws) - buffer_bytes(ref_ws, "scores") - buffer_bytes(ref_ws, "probs");
  dp.reference_peak = path_peak_bytes(s, dp.dtype, StageSwitch{}, "", {paths.fp32_math, false});
  const StageSwitch all_on = in.techniques.stages(in.techniques.num_configs() - 1);
  dp.fused_peak = path_peak_bytes(s, dp.dtype, all_on, cs.policy, paths);
  dp.golden_peak = dp.memory.golden_peak;
  dp.reference_viable = dp.reference_peak <= budget;
  dp.fused_viable = dp.fused_peak <= budget;
  dp.golden_viable = dp.golden_peak <= budget;
  dp.baseline = choose_baseline(cs, dp.dtype, budget, paths);
  dp.fallbacks = stage_fallbacks(s, dp.dtype, all_on, paths.fp32_math);
  dp.estimated_seconds = in.model.case_setup_s;
  if (dp.golden_viable) dp.estimated_seconds += forward_flops(s) / (in.model.golden_tflops * 1e12);
  return dp;
}

// One grid point into its (case, dtype)'s plan: the auto point's choice, the point's viability
// and, where it can run, its time: warmup, then as many timed pairs as the point's budget allows.
void plan_point(const GridPoint& gp, const CaseSpec& cs, const PlanInputs& in, DTypePlan& dp) {
  const TimeModel& model = in.model;
  uint32_t config = gp.config;
  if (gp.automatic) {
    dp.has_auto = true;
    dp.auto_position = dp.order.size();
    dp.auto_choice = auto_config(*in.dispatch, cs, dp.dtype, in.paths.fp32_math, in.techniques);
    config = dp.auto_choice.config;
  } else {
    dp.order.push_back(config);
  }
  const StageSwitch cand = in.techniques.stages(config);
  ++dp.selected_points;
  const PointViability v = assess_point(cs, dp.dtype, cand, in.budget.bytes, in.paths);
  if (!v.viable) {
    ++dp.nonviable_points;
    if (!gp.automatic) dp.nonviable_configs.push_back(config);
    if (cand[Stage::attn]) ++dp.nonviable_with_attn;
    return;
  }
  ++dp.viable_points;
  dp.auto_viable = dp.auto_viable || gp.automatic;
  const ForwardTimes t_cand = estimated_forward_times(cs.shape, dp.dtype, cand, model, in.paths.fp32_math);
  dp.estimated_seconds += estimated_point_seconds(model, dp.baseline_times.as_run(), t_cand.as_run());
  // A host-bound group's points are timed again, both sides replayed (a capture run in place
  // of the accuracy check's).
  if (dp.host_bound) dp.estimated_seconds += estimated_point_seconds(model, dp.baseline_times.replayed, t_cand.replayed);
}

}  // namespace

Plan make_plan(const CaseSet& cases, const TechniqueSet& techniques, const Selection& sel,
               uint64_t seed, const MemoryBudget& budget, const PathMemoryOptions& paths,
               const TimeModel& model, const DispatchTable* dispatch) {
  Plan plan;
  plan.cases_source = cases.source;
  plan.techniques_source = techniques.source;
  for (const auto& t : techniques.items) plan.technique_names.push_back(t.name);
  plan.seed = seed;
  plan.budget = budget;
  plan.paths = paths;
  plan.model = model;
  plan.configs_selected = selected_config_count(sel, techniques);
  plan.narrowed = sel.narrowed;

  const std::vector<GridPoint> grid = build_grid(cases, techniques, sel, seed);
  plan.total_points = grid.size();
  for (const GridPoint& p : grid) plan.auto_points += p.automatic;
  if (plan.auto_points > 0 && !dispatch) dispatch = &builtin_dispatch_table();
  if (plan.auto_points > 0) plan.dispatch_origin = dispatch_provenance(*dispatch);
  const PlanInputs in{techniques, budget, paths, model, dispatch};

  // The grid holds each (case, dtype)'s points together.
  for (size_t i = 0; i < grid.size();) {
    const GridPoint& first = grid[i];
    const CaseSpec& cs = cases.cases[first.case_index];
    if (plan.cases.empty() || plan.cases.back().spec != &cs) {
      CasePlan cp;
      cp.spec = &cs;
      cp.forward_flops = forward_flops(cs.shape);
      plan.cases.push_back(cp);
    }
    DTypePlan dp = dtype_plan(cs, first.dtype, in);
    dp.baseline_times = estimated_forward_times(cs.shape, dp.dtype, dp.baseline.stages, model, paths.fp32_math);
    dp.host_bound = model.replays_host_bound && !dp.baseline_times.graph && dp.baseline_times.host_bound();
    for (; i < grid.size() && grid[i].case_index == first.case_index && grid[i].dtype == first.dtype; ++i)
      plan_point(grid[i], cs, in, dp);
    std::sort(dp.nonviable_configs.begin(), dp.nonviable_configs.end());
    const int di = static_cast<int>(dp.dtype);
    plan.points_per_dtype[di] += dp.selected_points;
    plan.viable_per_dtype[di] += dp.viable_points;
    plan.nonviable_per_dtype[di] += dp.nonviable_points;
    plan.estimated_seconds += dp.estimated_seconds;
    plan.cases.back().dtypes.push_back(std::move(dp));
  }
  return plan;
}

namespace {

std::string baseline_label(const BaselineChoice& b) { return b.is_reference ? "reference" : "attn-only"; }

std::string bits_of(const Plan& plan, uint32_t config) {
  return config_bits(config, static_cast<int>(plan.technique_names.size()));
}

std::string names_of(const Plan& plan, uint32_t config) { return config_names(config, plan.technique_names); }

int dtypes_in_grid(const Plan& plan) {
  int n = 0;
  for (int d = 0; d < kNumDTypes; ++d) n += plan.points_per_dtype[d] > 0;
  return n;
}

}  // namespace

namespace {

void print_plan_header(const Plan& plan, std::FILE* out) {
  std::string techs;
  for (const auto& t : plan.technique_names) {
    if (!techs.empty()) techs += ' ';
    techs += t;
  }
  std::string per_dtype;
  for (int d = 0; d < kNumDTypes; ++d)
    if (plan.points_per_dtype[d] > 0)
      per_dtype += fmt::format("{}{} {}", per_dtype.empty() ? "" : ", ",
                               to_string(static_cast<DType>(d)), plan.points_per_dtype[d]);
  fmt::print(out, "tlbench plan: {} with techniques from {}\n", plan.cases_source, plan.techniques_source);
  const std::string configs =
      plan.auto_points == 0 ? fmt::format("{} configurations", plan.configs_selected)
                            : fmt::format("({} configurations + auto)", plan.configs_selected);
  fmt::print(out, "grid:          {} cases x {} x {} dtypes = {} points ({}){}\n", plan.cases.size(),
             configs, dtypes_in_grid(plan), plan.total_points,
             per_dtype.empty() ? "none selected" : "per dtype: " + per_dtype,
             plan.narrowed.empty() ? "" : "; " + plan.narrowed);
  fmt::print(out, "techniques:    {} (bit order of a configuration string)\n", techs);
  fmt::print(out, "shuffle seed:  {} (configurations run in a seeded order within each case and dtype)\n",
             plan.seed);
  fmt::print(out, "memory budget: {} ({})\n", human_bytes(plan.budget.bytes), plan.budget.source);
  fmt::print(out, "fp32 math:     {} on the fused path (the reference and the golden run ieee){}\n\n",
             to_string(plan.paths.fp32_math),
             plan.paths.keep_layer_outputs ? "; per-layer outputs kept (layer trace)" : "");

}

void print_case_table(const Plan& plan, std::FILE* out) {
  fmt::print(out, "{:>3}  {:<18} {:>21}  {:>5} {:>4} {:>6} {:>6}  {:<7} {:<6} {:>11}\n", "id", "name",
             "batch x seq x d_model", "heads", "hd", "d_ff", "layers", "mask", "policy", "GFLOP/fwd");
  for (const auto& cp : plan.cases) {
    const CaseSpec& c = *cp.spec;
    const LayerShape& s = c.shape;
    std::string policy = c.policy.size() > 6 ? c.policy.substr(0, 5) + "~" : c.policy;
    fmt::print(out, "{:>3}  {:<18} {:>21}  {:>5} {:>4} {:>6} {:>6}  {:<7} {:<6} {:>11.1f}\n", c.id,
               c.name.size() > 18 ? c.name.substr(0, 17) + "~" : c.name,
               fmt::format("{} x {} x {}", s.batch, s.seq, s.d_model), s.heads, s.head_dim(), s.d_ff,
               s.layers, to_string(s.mask), policy, cp.forward_flops / 1e9);
  }

}

// The memory table; returns the notes its rows call for.
std::vector<std::string> print_memory_table(const Plan& plan, std::FILE* out) {
  fmt::print(out, "\nmemory per path (peak = data + workspace + cuBLAS workspace; a measured point "
                  "holds baseline and candidate together)\n");
  fmt::print(out, "{:>3}  {:<5} {:>10} {:>10} {:>11} {:>10}  {:>10} {:>10} {:>10}  {:<4} {:<5}  {:<9} {:>6} {:>9}\n",
             "id", "dtype", "weights", "input", "activations", "scores", "ref peak", "fused peak",
             "golden", "ref", "fused", "baseline", "viable", "nonviable");
  std::vector<std::string> notes;
  for (const auto& cp : plan.cases) {
    for (const auto& dp : cp.dtypes) {
      fmt::print(out, "{:>3}  {:<5} {:>10} {:>10} {:>11} {:>10}  {:>10} {:>10} {:>10}  {:<4} {:<5}  {:<9} {:>6} {:>9}\n",
                 cp.spec->id, to_string(dp.dtype), human_bytes(dp.weights_bytes),
                 human_bytes(dp.input_bytes), human_bytes(dp.activation_bytes),
                 human_bytes(dp.memory.scores), human_bytes(dp.reference_peak),
                 human_bytes(dp.fused_peak), human_bytes(dp.golden_peak),
                 dp.reference_viable ? "yes" : "no", dp.fused_viable ? "yes" : "no",
                 baseline_label(dp.baseline), dp.viable_points, dp.nonviable_points);
      if (!dp.baseline.is_reference)
        notes.push_back(fmt::format("case {} {}: {}", cp.spec->id, to_string(dp.dtype), dp.baseline.reason));
      if (dp.nonviable_points > 0) {
        const int without_attn = dp.nonviable_points - dp.nonviable_with_attn;
        notes.push_back(fmt::format(
            "case {} {}: {} nonviable point(s) ({} without attn, {} with attn), never attempted",
            cp.spec->id, to_string(dp.dtype), dp.nonviable_points, without_attn, dp.nonviable_with_attn));
      }
      if (!dp.golden_viable)
        notes.push_back(fmt::format("case {} {}: the fp32 golden ({}) does not fit; accuracy falls "
                                    "back to the per-dtype floor",
                                    cp.spec->id, to_string(dp.dtype), human_bytes(dp.golden_peak)));
      if (dp.host_bound)
        notes.push_back(fmt::format("case {} {}: the baseline is likely host-bound (modelled {:.3f} ms launched, "
                                    "{:.3f} ms replayed): its points are timed against the replay too",
                                    cp.spec->id, to_string(dp.dtype), dp.baseline_times.eager * 1e3,
                                    dp.baseline_times.replayed * 1e3));
    }
  }
  return notes;
}

// Which techniques' kernels cannot run which (case, dtype), before anything runs.
void print_fallbacks(const Plan& plan, std::FILE* out) {
  std::vector<std::string> lines;
  for (const auto& cp : plan.cases)
    for (const auto& dp : cp.dtypes)
      for (const StageFallback& f : dp.fallbacks)
        lines.push_back(fmt::format("{:>3}  {:<5} {:<5} {}", cp.spec->id, to_string(dp.dtype), to_string(f.stage), f.why));
  if (lines.empty()) {
    fmt::print(out, "\nfallbacks: none (every technique's kernels run every selected case and dtype)\n");
    return;
  }
  fmt::print(out, "\nfallbacks (the stage runs the reference's kernels wherever its technique is on; the "
                  "rows say so)\n");
  for (const std::string& l : lines) fmt::print(out, "{}\n", l);
}

void print_auto_choices(const Plan& plan, std::FILE* out) {
  if (plan.auto_points > 0) {
    fmt::print(out, "\nauto: {} point(s), one per case and dtype, configuration from {}\n",
               plan.auto_points, plan.dispatch_origin);
    for (const auto& cp : plan.cases)
      for (const auto& dp : cp.dtypes)
        if (dp.has_auto)
          fmt::print(out, "{:>3}  {:<5} {} {:<24} {}{}\n", cp.spec->id, to_string(dp.dtype),
                     bits_of(plan, dp.auto_choice.config),
                     names_of(plan, dp.auto_choice.config), dp.auto_choice.choice.reason,
                     dp.auto_viable ? "" : " (nonviable)");
  }
}

void print_notes_and_totals(const Plan& plan, const std::vector<std::string>& notes, std::FILE* out) {
  if (!notes.empty()) {
    fmt::print(out, "\nnotes:\n");
    for (const auto& n : notes) fmt::print(out, "  {}\n", n);
  }

  fmt::print(out, "\ntotals:\n");
  for (int d = 0; d < kNumDTypes; ++d)
    if (plan.points_per_dtype[d] > 0)
      fmt::print(out, "  {}: {} points, {} viable, {} nonviable\n", to_string(static_cast<DType>(d)),
                 plan.points_per_dtype[d], plan.viable_per_dtype[d], plan.nonviable_per_dtype[d]);
  fmt::print(out, "  all: {} points\n", plan.total_points);
  if (plan.total_points == 0)
    fmt::print(out, "  the selection matches no point (a case's own dtypes limit --dtypes)\n");
  const TimeModel& m = plan.model;
  fmt::print(out,
             "\ntime estimate: about {} (a model, not a measurement: fused GEMMs {:.0f}/{:.0f}/{:.0f}, fused "
             "attention {:.0f}/{:.0f}/{:.0f} and reference {:.0f}/{:.0f}/{:.0f} TFLOP/s for fp16/bf16/fp32, {:.1f} "
             "TB/s for scores and elementwise traffic, {:.0f} us per launch from the host and {:.2f} us per kernel "
             "in a graph{}; per point {:.0f} ms with warm-up (>= {} "
             "candidate runs, the accuracy check's included, and {:.0f} ms), at least {} timed pairs, in {} "
             "block(s))\n",
             human_seconds(plan.estimated_seconds), m.fused_tflops[0], m.fused_tflops[1], m.fused_tflops[2],
             m.fused_attention_tflops[0], m.fused_attention_tflops[1], m.fused_attention_tflops[2],
             m.reference_tflops[0], m.reference_tflops[1], m.reference_tflops[2], m.memory_tb_per_s, m.launch_us,
             m.graph_launch_us, m.replays_host_bound ? ", host-bound groups timed against the replay too" : "",
             m.point_time_budget_s * 1e3, m.warmup_min_runs, m.warmup_s * 1e3, m.floor_pairs,
             m.blocks);
}

}  // namespace

void print_plan(const Plan& plan, std::FILE* out) {
  print_plan_header(plan, out);
  print_case_table(plan, out);
  const std::vector<std::string> notes = print_memory_table(plan, out);
  print_fallbacks(plan, out);
  print_auto_choices(plan, out);
  print_notes_and_totals(plan, notes, out);
}

namespace {

using ordered = nlohmann::ordered_json;

ordered time_estimate_json(const Plan& plan) {
  const TimeModel& m = plan.model;
  return {
      {"seconds", plan.estimated_seconds},
      {"is_estimate", true},
      {"model",
       {{"fused_tflops", std::vector<double>(std::begin(m.fused_tflops), std::end(m.fused_tflops))},
        {"fused_fp32_ieee_tflops", m.fused_fp32_ieee_tflops},
        {"fused_attention_tflops",
         std::vector<double>(std::begin(m.fused_attention_tflops), std::end(m.fused_attention_tflops))},
        {"fused_fp32_ieee_attention_tflops", m.fused_fp32_ieee_attention_tflops},
        {"reference_tflops",
         std::vector<double>(std::begin(m.reference_tflops), std::end(m.reference_tflops))},
        {"golden_tflops", m.golden_tflops},
        {"memory_tb_per_s", m.memory_tb_per_s},
        {"launch_us", m.launch_us},
        {"graph_launch_us", m.graph_launch_us},
        {"launch_overlap_loss", m.launch_overlap_loss},
        {"replays_host_bound", m.replays_host_bound},
        {"warmup_s", m.warmup_s},
        {"warmup_min_runs", m.warmup_min_runs},
        {"point_time_budget_s", m.point_time_budget_s},
        {"floor_pairs", m.floor_pairs},
        {"max_pairs", m.max_pairs},
        {"blocks", m.blocks}}}};
}

ordered dtype_plan_json(const Plan& plan, const LayerShape& s, const DTypePlan& dp) {
  using json = ordered;
  // What each stage of one layer must do at least in this dtype (stack/stage_costs.hpp).
  json stage_costs = json::array();
  for (const StageCost& c : layer_stage_costs(s, dp.dtype))
    stage_costs.push_back({{"stage", to_string(c.stage)}, {"flops", c.flops}, {"min_bytes", c.min_bytes}});
  json order = json::array(), nonviable = json::array();
  for (size_t i = 0; i <= dp.order.size(); ++i) {
    if (dp.has_auto && dp.auto_position == i) order.push_back("auto");
    if (i < dp.order.size()) order.push_back(bits_of(plan, dp.order[i]));
  }
  for (uint32_t k : dp.nonviable_configs) nonviable.push_back(bits_of(plan, k));
  json fallbacks = json::array();
  for (const StageFallback& f : dp.fallbacks) fallbacks.push_back({{"stage", to_string(f.stage)}, {"why", f.why}});
  json baseline = {{"kind", baseline_label(dp.baseline)},
                   {"stages", stage_names(dp.baseline.stages)}};
  if (!dp.baseline.reason.empty()) baseline["reason"] = dp.baseline.reason;
  return {{"dtype", to_string(dp.dtype)},
          {"weights_bytes", dp.weights_bytes},
          {"input_bytes", dp.input_bytes},
          {"activation_bytes", dp.activation_bytes},
          {"scores_bytes", dp.memory.scores},
          {"reference_peak_bytes", dp.reference_peak},
          {"fused_peak_bytes", dp.fused_peak},
          {"golden_peak_bytes", dp.golden_peak},
          {"reference_viable", dp.reference_viable},
          {"fused_viable", dp.fused_viable},
          {"golden_viable", dp.golden_viable},
          {"baseline", baseline},
          {"fallbacks", fallbacks},
          {"points", dp.selected_points},
          {"viable", dp.viable_points},
          {"nonviable", dp.nonviable_points},
          {"nonviable_configs", nonviable},
          {"order", order},
          {"auto", dp.has_auto ? json{{"config", bits_of(plan, dp.auto_choice.config)},
                                      {"config_names", names_of(plan, dp.auto_choice.config)},
                                      {"exact", dp.auto_choice.choice.exact},
                                      {"viable", dp.auto_viable},
                                      {"reason", dp.auto_choice.choice.reason}}
                               : json(nullptr)},
          {"estimated_seconds", dp.estimated_seconds},
          {"host_bound", dp.host_bound},
          {"layer_stage_costs", stage_costs}};
}

ordered case_plan_json(const Plan& plan, const CasePlan& cp) {
  using json = ordered;
  const CaseSpec& c = *cp.spec;
  const LayerShape& s = c.shape;
  // eps through its shortest float text, so 1e-5 prints as 1e-05, not 9.999999747378752e-06.
  const double eps = std::stod(fmt::format("{}", s.eps));
  json jc = {{"id", c.id},
             {"name", c.name},
             {"batch", s.batch},
             {"seq", s.seq},
             {"d_model", s.d_model},
             {"heads", s.heads},
             {"head_dim", s.head_dim()},
             {"d_ff", s.d_ff},
             {"layers", s.layers},
             {"mask", to_string(s.mask)},
             {"activation", to_string(s.activation)},
             {"eps", eps},
             {"policy", c.policy},
             {"seed", c.seed},
             {"forward_flops", cp.forward_flops}};
  if (s.mask == MaskKind::padding) jc["valid_lens"] = s.valid_lens;
  json dts = json::array();
  for (const auto& dp : cp.dtypes) dts.push_back(dtype_plan_json(plan, s, dp));
  jc["dtypes"] = dts;
  return jc;
}

}  // namespace

std::string plan_json(const Plan& plan) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["cases_file"] = plan.cases_source;
  doc["techniques_file"] = plan.techniques_source;
  doc["techniques"] = plan.technique_names;
  doc["seed"] = plan.seed;
  doc["memory_budget"] = {{"bytes", plan.budget.bytes},
                          {"from_device", plan.budget.from_device},
                          {"source", plan.budget.source}};
  doc["fp32_math"] = to_string(plan.paths.fp32_math);
  doc["layer_trace"] = plan.paths.keep_layer_outputs;
  doc["configs_per_case_and_dtype"] = plan.configs_selected;
  if (!plan.narrowed.empty()) doc["narrowed"] = plan.narrowed;
  doc["total_points"] = plan.total_points;
  doc["auto_points"] = plan.auto_points;
  if (plan.auto_points > 0) doc["dispatch_table"] = plan.dispatch_origin;
  json per = json::object();
  for (int d = 0; d < kNumDTypes; ++d)
    if (plan.points_per_dtype[d] > 0)
      per[std::string(to_string(static_cast<DType>(d)))] = {{"points", plan.points_per_dtype[d]},
                                                            {"viable", plan.viable_per_dtype[d]},
                                                            {"nonviable", plan.nonviable_per_dtype[d]}};
  doc["per_dtype"] = per;
  doc["time_estimate"] = time_estimate_json(plan);
  json cases = json::array();
  for (const auto& cp : plan.cases) cases.push_back(case_plan_json(plan, cp));
  doc["cases"] = cases;
  return doc.dump(2) + "\n";
}

}  // namespace tlb
