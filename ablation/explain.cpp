#include "explain.hpp"

#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "ceilings_cache.hpp"
#include "common/cuda_check.hpp"
#include "dispatch_table.hpp"
#include "provenance.hpp"
#include "stage_timing.hpp"
#include "stack/layer_stack.hpp"
#include "statistics.hpp"
#include "timing/event_cost.hpp"
#include "timing/event_timer.hpp"

namespace tlb {

using json = nlohmann::json;

namespace {

const TechniqueSet& techniques() {
  static const TechniqueSet t = default_techniques();
  return t;
}

// The configuration index of a bit string of the built-in techniques (nullopt: not one).
std::optional<uint32_t> config_of(const std::string& bits) {
  for (uint32_t c = 0; c < techniques().num_configs(); ++c)
    if (techniques().bits(c) == bits) return c;
  return std::nullopt;
}

// Repetitions that fit in about 0.3 s of forwards, 5 to 50 (or the option's).
int reps_for(double forward_ms, int asked) {
  if (asked > 0) return asked;
  return std::clamp(static_cast<int>(300.0 / std::max(forward_ms, 1e-3)), 5, 50);
}

ExplainConfig explain_config(const CaseData& data, const CaseSpec& spec, DType dtype, Fp32Math math,
                             uint32_t config, const Ceilings& ceil, int asked_reps, cudaStream_t stream) {
  ExplainConfig r;
  r.config = techniques().bits(config);
  r.names = techniques().names(config);
  PathOptions po;
  po.stages = techniques().stages(config);
  po.policy = spec.policy;
  po.fp32_math = math;
  r.graph = po.stages[Stage::graph];
  StackPath path(data, po, stream);
  EventTimer timer(stream);
  // Warm-up: the eager pass (variant names), the replay's capture, clocks.
  path.run();
  path.run_replayed();
  TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double first = timer.ms([&] { path.run(); });
  const int reps = reps_for(first, asked_reps);
  r.reps = reps;
  for (int i = 0; i < std::min(reps, 10); ++i) path.run();
  r.dispatch = dispatch_text(path.dispatch());

  // A graph configuration's serial and event graphs are captured here, outside the timing.
  path.run_serial();
  StageEventRuns unused;
  add_stage_event_run(path, unused);
  std::vector<double> forward, eager, serial, replayed;
  StageEventRuns events;
  for (int i = 0; i < reps; ++i) {
    forward.push_back(timer.ms([&] { path.run(); }));
    eager.push_back(timer.ms([&] { path.run_eager(); }));
    serial.push_back(timer.ms([&] { path.run_serial(); }));
    add_stage_event_run(path, events);
  }
  const StageTiming timing =
      stage_timing(events, static_cast<int>(spec.shape.layers), [&] { return probe_event_costs_ms(stream); });
  r.event_ms = timing.event_ms;
  r.event_probed = timing.event_probed;
  r.event_forward_ms = timing.event_forward_ms;
  r.event_forward_se_ms = timing.event_forward_se_ms;
  r.stage_events_total_ms = timing.stage_events_total_ms;
  r.layer_events_total_ms = timing.layer_events_total_ms;
  // Marginal costs: the plain replay and the one repeating the stage in turns, so drift lands
  // on both; the median of the pairs' differences.
  std::vector<double> marginal(kNumCostStages);
  for (int s = 0; s < kNumCostStages; ++s) {
    const auto cs = static_cast<CostStage>(s);
    path.run_replayed_repeating(cs);  // capture, outside the timing
    TLB_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> diff;
    for (int i = 0; i < reps; ++i) {
      const double base = timer.ms([&] { path.run_replayed(); });
      const double twice = timer.ms([&] { path.run_replayed_repeating(cs); });
      diff.push_back(twice - base);
      replayed.push_back(base);
    }
    marginal[static_cast<size_t>(s)] = stats::median(diff);
  }
  r.forward_ms = stats::median(forward);
  r.eager_ms = stats::median(eager);
  r.serial_ms = stats::median(serial);
  r.replayed_ms = stats::median(replayed);
  const auto costs = forward_stage_costs(spec.shape, dtype, path.deferred_layers());
  for (int s = 0; s < kNumCostStages; ++s) {
    ExplainStage st;
    st.cost = costs[static_cast<size_t>(s)];
    st.floor_ms = floor_ms(st.cost, ceil);
    st.events_ms = timing.ms[static_cast<size_t>(s)];
    st.events_raw_ms = timing.raw_ms[static_cast<size_t>(s)];
    st.marginal_ms = marginal[static_cast<size_t>(s)];
    r.stages.push_back(st);
  }
  return r;
}

}  // namespace

double ExplainConfig::events_sum_ms() const {
  double t = 0;
  for (const ExplainStage& s : stages) t += s.events_ms;
  return t;
}

double ExplainConfig::marginal_sum_ms() const {
  double t = 0;
  for (const ExplainStage& s : stages) t += s.marginal_ms;
  return t;
}

CaseSpec check_explain_options(const ExplainOptions& o) {
  const CaseSet cases = load_cases(o.cases_path);
  const auto it = std::find_if(cases.cases.begin(), cases.cases.end(), [&](const CaseSpec& c) { return c.id == o.case_id; });
  if (it == cases.cases.end())
    throw ConfigError(fmt::format("--case {}: no such case in {}", o.case_id, o.cases_path));
  CaseSpec spec = *it;
  if (std::find(spec.dtypes.begin(), spec.dtypes.end(), o.dtype) == spec.dtypes.end())
    throw ConfigError(fmt::format("--dtype {}: case {} does not run in it", to_string(o.dtype), o.case_id));
  if (o.configs.empty()) throw ConfigError("--configs: name at least one configuration (a bit string or auto)");
  for (const std::string& c : o.configs)
    if (c != "auto" && !config_of(c))
      throw ConfigError(fmt::format("--configs {}: expected a bit string of {} techniques (e.g. {}) or auto", c,
                                    techniques().size(), techniques().bits(techniques().num_configs() - 1)));
  check_ceilings_file(o.ceilings_path);
  spec.seed = data_seed(spec, o.seed);
  spec.policy = layer_policy(spec);
  return spec;
}

Explanation run_explain(const ExplainOptions& o) {
  Explanation e;
  e.spec = check_explain_options(o);
  e.dtype = o.dtype;
  e.fp32_math = o.fp32_math;
  TLB_CUDA_CHECK(cudaSetDevice(0));
  const DeviceInfo dev = query_device(0);
  e.device = dev.name;
  e.device_uuid = dev.uuid;
  cudaStream_t stream = nullptr;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> owned(stream, [](cudaStream_t s) { cudaStreamDestroy(s); });
  e.ceilings = ceilings_for(o.ceilings_path, dev, o.dtype, o.fp32_math, stream, e.ceilings_source);
  const CaseData data(e.spec, o.dtype, o.dtype, stream);
  for (const std::string& c : o.configs) {
    uint32_t config = 0;
    std::string note;
    if (c == "auto") {
      const AutoConfig a = auto_config(builtin_dispatch_table(), e.spec, o.dtype, o.fp32_math, techniques());
      config = a.config;
      note = a.note;
    } else {
      config = *config_of(c);
    }
    ExplainConfig ec;
    try {
      ec = explain_config(data, e.spec, o.dtype, o.fp32_math, config, e.ceilings.ceilings, o.reps, stream);
    } catch (const DeviceError& err) {
      // Out of memory (case 14's dense reference) or a capture refused: this configuration is
      // not measured, the others still are.
      if (err.sticky()) throw;
      ec.config = techniques().bits(config);
      ec.names = techniques().names(config);
      ec.error = err.what();
    }
    ec.note = note;
    if (c == "auto") ec.config = "auto=" + ec.config;
    e.configs.push_back(std::move(ec));
  }
  return e;
}

void print_explanation(const Explanation& e, std::FILE* out) {
  const LayerShape& s = e.spec.shape;
  fmt::print(out, "case {} {}: batch {}, seq {}, d_model {}, heads {}, d_ff {}, {} layers, mask {}; {}{}\n", e.spec.id,
             e.spec.name, s.batch, s.seq, s.d_model, s.heads, s.d_ff, s.layers, to_string(s.mask), to_string(e.dtype),
             e.dtype == DType::fp32 ? fmt::format(" ({})", to_string(e.fp32_math)) : std::string());
  fmt::print(out, "{}: matrix rate {:.1f} TFLOP/s ({}x{}x{} cuBLAS GEMM, {}), copy bandwidth {:.0f} GB/s (read + write); {}\n",
             e.device, e.ceilings.ceilings.tensor_tflops, e.ceilings.gemm_n, e.ceilings.gemm_n, e.ceilings.gemm_n,
             e.ceilings.gemm_math, e.ceilings.ceilings.bandwidth_gbs,
             e.ceilings_source == "measured" ? "measured now" : "from " + e.ceilings_source);
  for (const ExplainConfig& c : e.configs) {
    if (!c.error.empty()) {
      fmt::print(out, "\n{} ({}{}): not measured: {}\n", c.config, c.names, c.note.empty() ? "" : "; " + c.note,
                 c.error);
      continue;
    }
    fmt::print(out, "\n{} ({}{}): forward {:.4f} ms{}\n", c.config, c.names, c.note.empty() ? "" : "; " + c.note,
               c.forward_ms, c.graph ? " (graph replay)" : " (eager)");
    fmt::print(out, "  {:<12} {:>10} {:>10} {:>10} {:>11} {:>6} {:>11} {:>6}\n", "stage", "GFLOP", "MB", "floor ms",
               "events ms", "floor", "marginal ms", "floor");
    auto frac = [](double f, double m) {
      const double x = floor_fraction(f, m);
      return std::isfinite(x) && m > 0 ? fmt::format("{:.0f}%", 100 * x) : std::string("-");
    };
    for (const ExplainStage& st : c.stages)
      fmt::print(out, "  {:<12} {:>10.2f} {:>10.1f} {:>10.4f} {:>11.4f} {:>6} {:>11.4f} {:>6}\n", to_string(st.cost.stage),
                 st.cost.flops / 1e9, st.cost.min_bytes / 1e6, st.floor_ms, st.events_ms, frac(st.floor_ms, st.events_ms),
                 st.marginal_ms, frac(st.floor_ms, st.marginal_ms));
    fmt::print(out, "  {:<12} {:>10} {:>10} {:>10} {:>11.4f} {:>6} {:>11} {:>6}\n", "PDL overlap", "", "", "",
               c.pdl_overlap_ms(), "", "", "");
    fmt::print(out, "  {:<12} {:>10} {:>10} {:>10} {:>11} {:>6} {:>11.4f}\n", "launch gaps", "", "", "", "", "",
               c.launch_gaps_ms());
    double floor_sum = 0;
    for (const ExplainStage& st : c.stages) floor_sum += st.floor_ms;
    const double events_forward = c.events_sum_ms() + c.pdl_overlap_ms();
    fmt::print(out, "  {:<12} {:>10} {:>10} {:>10.4f} {:>11.4f} {:>6} {:>11.4f} {:>6}\n", "forward", "", "", floor_sum,
               events_forward, frac(floor_sum, events_forward), c.forward_ms, frac(floor_sum, c.forward_ms));
    const std::string totals = fmt::format(
        "that forward with an event before every stage, median {:.4f} ms, against one before every layer, {:.4f} ms",
        c.stage_events_total_ms, c.layer_events_total_ms);
    const std::string event_source =
        c.event_probed ? fmt::format("measured apart from the forward: its own estimate, {:.2f} +- {:.2f} us from {}, "
                                     "is too uncertain (a standard error of 0.5 us or more)",
                                     1e3 * c.event_forward_ms, 1e3 * c.event_forward_se_ms, totals)
                       : fmt::format("from {}, run by run", totals);
    fmt::print(out,
               "  events: the stages of {} forward without PDL, less {:.2f} us per event ({}), add up to {:.4f} "
               "ms ({:+.1f} % of its {:.4f} ms without events); PDL overlap is the forward as run less that one; "
               "marginal: each stage's cost inside a graph replay of {:.4f} ms\n",
               c.graph ? "a replayed" : "an eager", 1e3 * c.event_ms, event_source, c.events_sum_ms(),
               100 * (c.events_sum_ms() / c.serial_ms - 1), c.serial_ms, c.replayed_ms);
    fmt::print(out, "  ran: {}\n  {} timed repetitions per figure\n", c.dispatch, c.reps);
  }
  fmt::print(out, "\n(a floor is the longer of the stage's FLOPs at the matrix rate and its least bytes at the copy "
                  "bandwidth)\n");
}

json explanation_json(const Explanation& e) {
  json configs = json::array();
  for (const ExplainConfig& c : e.configs) {
    json stages = json::array();
    for (const ExplainStage& st : c.stages)
      stages.push_back({{"stage", std::string(to_string(st.cost.stage))},
                        {"flops", st.cost.flops},
                        {"min_bytes", st.cost.min_bytes},
                        {"tensor", st.cost.tensor},
                        {"floor_ms", st.floor_ms},
                        {"events_ms", st.events_ms},
                        {"events_raw_ms", st.events_raw_ms},
                        {"marginal_ms", st.marginal_ms}});
    if (!c.error.empty()) {
      configs.push_back({{"config", c.config}, {"names", c.names}, {"note", c.note}, {"error", c.error}});
      continue;
    }
    configs.push_back({{"config", c.config},
                       {"names", c.names},
                       {"note", c.note},
                       {"graph", c.graph},
                       {"dispatch", c.dispatch},
                       {"reps", c.reps},
                       {"forward_ms", c.forward_ms},
                       {"eager_ms", c.eager_ms},
                       {"serial_ms", c.serial_ms},
                       {"event_ms", c.event_ms},
                       {"event_ms_source", c.event_probed ? "probe" : "forward"},
                       {"event_forward_ms", c.event_forward_ms},
                       {"event_forward_se_ms", c.event_forward_se_ms},
                       {"stage_events_total_ms", c.stage_events_total_ms},
                       {"layer_events_total_ms", c.layer_events_total_ms},
                       {"pdl_overlap_ms", c.pdl_overlap_ms()},
                       {"replayed_ms", c.replayed_ms},
                       {"events_sum_ms", c.events_sum_ms()},
                       {"marginal_sum_ms", c.marginal_sum_ms()},
                       {"launch_gaps_ms", c.launch_gaps_ms()},
                       {"stages", stages}});
  }
  return {{"case_id", e.spec.id},
          {"case_name", e.spec.name},
          {"dtype", std::string(to_string(e.dtype))},
          {"math", e.dtype == DType::fp32 ? std::string(to_string(e.fp32_math)) : std::string("fp32-acc")},
          {"device", e.device},
          {"ceilings", ceilings_json(e.ceilings)},
          {"ceilings_math", e.ceilings.gemm_math},
          {"ceilings_source", e.ceilings_source},
          {"configs", configs}};
}

}  // namespace tlb
