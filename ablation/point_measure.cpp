#include "point_measure.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "ceilings_cache.hpp"
#include "common/cuda_check.hpp"
#include "config_bits.hpp"
#include "run_report.hpp"
#include "stage_timing.hpp"
#include "timing/event_cost.hpp"
#include "stack/memory_plan.hpp"
#include "text.hpp"

namespace tlb {
namespace {

std::optional<double> finite_or_none(double v) {
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

void add_note(PointRow& r, const std::string& s) { r.note += (r.note.empty() ? "" : "; ") + s; }

// The device memory in use, sampled at the points of a measurement where it peaks.
struct PeakMemory {
  uint64_t used = device_used_bytes();
  void sample() { used = std::max(used, device_used_bytes()); }
};

// A stage switch as a bit string over the run's techniques ("01000"), or the stage names where
// the technique set cannot express it.
std::string bits_of(const TechniqueSet& t, const StageSwitch& s) {
  for (uint32_t c = 0; c < t.num_configs(); ++c)
    if (t.stages(c) == s) return t.bits(c);
  return stage_names(s);
}

// ABBA pairs of two forwards, abandoned on Ctrl-C.
PairedMeasurement time_pairs(const MeasureContext& ctx, const TimerOptions& timer, const std::function<void()>& ref,
                             const std::function<void()>& cand) {
  return measure_paired(ctx.clock, ref, cand, timer, ctx.tracker, [] { return interrupt_requested(); });
}

// Times an eager baseline against its own graph replay (HostProbe). Nothing where the run
// was interrupted, the probe has no interval or the forward cannot be captured (the group's
// measured rows then carry no host-bound verdict, and their notes say why).
void probe_host_bound(const MeasureContext& ctx, Group& g) {
  StackPath& base = *g.baseline;
  try {
    base.run_replayed();  // captures, outside the timing
    TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    const PairedMeasurement m =
        time_pairs(ctx, timer_options(ctx.opt), [&base] { base.run(); }, [&base] { base.run_replayed(); });
    if (m.stop == stats::StopReason::interrupted) return;
    if (!std::isfinite(m.speedup.median) || !std::isfinite(m.speedup.lo)) {
      g.host_probe_note = "baseline against its graph replay: no usable interval, no host-bound verdict";
      return;
    }
    HostProbe hp;
    hp.eager_ms = m.ref.median;
    hp.replay_ms = m.cand.median;
    hp.ratio = m.speedup;
    hp.host_bound = m.speedup.lo > kHostBoundRatio;
    g.host_probe = hp;
    g.baseline_ms = hp.eager_ms;
    g.baseline_replay_ms = hp.replay_ms;
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    g.host_probe_note = fmt::format("baseline not replayed from a graph ({}): no host-bound verdict", e.what());
  }
}

// The group's data and baseline path, once; a failure there is every point's row.
void set_up_group(const MeasureContext& ctx, Group& g) {
  if (g.set_up) return;
  g.set_up = true;
  ensure_golden(ctx, g);
  try {
    g.data = std::make_unique<CaseData>(g.spec, g.dtype, g.dtype, ctx.stream);
    PathOptions po;
    po.stages = g.baseline_choice.stages;
    po.policy = g.spec.policy;
    po.fp32_math = ctx.opt.fp32_math;
    g.baseline = std::make_unique<StackPath>(*g.data, po, ctx.stream);
    g.baseline->poison();
    g.baseline->run();
    const size_t bytes = g.elements * static_cast<size_t>(dtype_bytes(g.dtype));
    g.baseline_out = DeviceBuffer(bytes);
    TLB_CUDA_CHECK(cudaMemcpyAsync(g.baseline_out.get(), g.baseline->output(), bytes,
                                   cudaMemcpyDeviceToDevice, ctx.stream));
    TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (g.golden_ok)
      g.baseline_golden = compare_to_golden(g.baseline_out.get(), g.dtype,
                                            g.golden_out.as<float>(), g.elements, ctx.stream);
    if (!ctx.opt.aa && !g.baseline_choice.stages[Stage::graph]) probe_host_bound(ctx, g);
  } catch (const DeviceOutOfMemory& e) {
    g.failed_status = StatusKind::oom;
    g.failed_note = fmt::format("baseline {} could not be allocated: {}", g.baseline_bits, e.what());
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    g.failed_status = StatusKind::error;
    g.failed_note = fmt::format("baseline {} failed: {}", g.baseline_bits, e.what());
  } catch (const std::exception& e) {
    g.failed_status = StatusKind::error;
    g.failed_note = fmt::format("baseline {} failed: {}", g.baseline_bits, e.what());
  }
  if (g.failed_status) {
    g.baseline.reset();
    g.data.reset();
    g.baseline_out = DeviceBuffer();
  }
}

// The row's fields that do not depend on measuring: the case, dtype, math and configuration.
PointRow base_row(const MeasureContext& ctx, const Group& g, const SchedPoint& p) {
  const CaseSpec& c = g.spec;
  PointRow r;
  r.case_id = c.id;
  r.case_name = c.name;
  r.batch = c.shape.batch;
  r.seq = c.shape.seq;
  r.d_model = c.shape.d_model;
  r.heads = c.shape.heads;
  r.d_ff = c.shape.d_ff;
  r.layers = c.shape.layers;
  r.mask = std::string(to_string(c.shape.mask));
  r.dtype = std::string(to_string(g.dtype));
  r.math = row_math(g.dtype, ctx.opt.fp32_math);
  r.config = ctx.techniques.bits(p.config);
  r.config_names = ctx.techniques.names(p.config);
  if (p.automatic) {
    r.auto_choice = r.config;
    r.config = "auto";
    r.config_names = "auto=" + r.config_names;
  }
  r.policy = c.policy;
  return r;
}

// Memory against the budget; decides the group's baseline. Returns true where the row is
// complete without running anything: an A/A point off the reference, a nonviable point, or a
// group whose baseline could not be set up.
bool settle_without_running(const MeasureContext& ctx, Group& g, const PointViability& v, PointRow& r) {
  if (ctx.opt.aa && !v.baseline.is_reference) {
    // An A/A row is the reference against itself, whatever other points would be timed against.
    r.baseline = ctx.techniques.bits(0);
    r.status = StatusKind::nonviable;
    r.note = v.baseline.reason;
    if (!v.viable) r.note += "; " + v.reason;
    // The golden still runs: it streams attention and exists for every case.
    ensure_golden(ctx, g);
    r.note += "; " + g.golden_note;
    return true;
  }
  if (!v.viable) {
    r.status = StatusKind::nonviable;
    r.note = v.reason;
    if (!v.baseline.is_reference) r.note += "; " + v.baseline.reason;
    return true;
  }
  set_up_group(ctx, g);
  if (g.failed_status) {
    r.status = *g.failed_status;
    r.note = g.failed_note;
    return true;
  }
  if (!v.baseline.is_reference) r.note = v.baseline.reason;
  return false;
}

// The candidate path, or nothing with the row's status and note saying why.
std::unique_ptr<StackPath> build_candidate(const MeasureContext& ctx, Group& g, const PathOptions& po,
                                           PointRow& r, PeakMemory& peak) {
  try {
    auto cand = std::make_unique<StackPath>(*g.data, po, ctx.stream);
    peak.sample();
    return cand;
  } catch (const DeviceOutOfMemory& e) {
    r.status = StatusKind::oom;
    add_note(r, fmt::format("candidate could not be allocated: {}", e.what()));
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    r.status = StatusKind::error;
    add_note(r, fmt::format("candidate could not be built: {}", e.what()));
  } catch (const std::exception& e) {
    r.status = StatusKind::error;
    add_note(r, fmt::format("candidate could not be built: {}", e.what()));
  }
  return nullptr;
}

// What ran, stage by stage, and the status it makes: a wanted technique that fell back names
// its stage and why. Returns whether a tensor-core stage of ours ran (fp32: TF32 math).
bool record_dispatch(const MeasureContext& ctx, const StackPath& cand, DType dtype, PointRow& r) {
  std::vector<std::string> fb_stages, fb_reasons;
  bool tensor_core_stage = false;
  r.dispatch = dispatch_text(cand.dispatch());
  for (const StageDispatch& d : cand.dispatch()) {
    if (d.wanted && !d.fused) {
      fb_stages.emplace_back(to_string(d.stage));
      fb_reasons.push_back(fmt::format("{}: {}", to_string(d.stage), d.reason));
    }
    if (d.fused && (d.stage == Stage::qkv || d.stage == Stage::attn || d.stage == Stage::ffn))
      tensor_core_stage = true;
  }
  for (size_t i = 0; i < fb_reasons.size(); ++i) r.fallback_reasons += (i ? "; " : "") + fb_reasons[i];
  if (ctx.opt.aa) {
    r.status = StatusKind::aa;
    if (dtype == DType::fp32) r.math = std::string(to_string(Fp32Math::ieee));
  } else if (!fb_stages.empty()) {
    r.status = PointStatus::fallback(fb_stages);
  } else {
    r.status = StatusKind::ok;
  }
  return tensor_core_stage;
}

// The candidate's output against the baseline's (strict) and the golden's (golden error).
void check_accuracy(const MeasureContext& ctx, const Group& g, const StackPath& cand,
                    bool against_reference, bool tensor_core_stage, PointRow& r) {
  const StrictStats st = compare_to_reference(cand.output(), g.baseline_out.get(), g.dtype, g.elements,
                                              ctx.opt.tol, ctx.stream);
  r.max_abs_err = st.max_abs;
  r.max_rel_err = st.max_rel;
  r.strict_violations = static_cast<int64_t>(st.violations);
  r.strict_pass = strict_pass(st);
  r.nan_count = static_cast<int64_t>(st.nan);
  r.inf_count = static_cast<int64_t>(st.inf);
  if (st.ref_nonfinite > 0)
    add_note(r, fmt::format("baseline output has {} non-finite elements", st.ref_nonfinite));
  if (!g.golden_ok) {
    add_note(r, g.golden_note);
    // Without a golden there is no error norm, but a NaN is still a failure.
    if (st.nan + st.inf > 0) r.golden_pass = false;
    return;
  }
  const GoldenError ge =
      compare_to_golden(cand.output(), g.dtype, g.golden_out.as<float>(), g.elements, ctx.stream);
  std::optional<double> ref_err;
  if (against_reference && g.baseline_golden) ref_err = g.baseline_golden->rel_l2;
  const Fp32Math ran = (g.dtype == DType::fp32 && ctx.opt.fp32_math == Fp32Math::tf32 && tensor_core_stage)
                           ? Fp32Math::tf32
                           : Fp32Math::ieee;
  const GoldenVerdict gv = golden_verdict(ge, ref_err, g.dtype, ran);
  r.golden_rel_l2 = ge.rel_l2;
  if (ref_err) r.golden_rel_l2_ref = *ref_err;
  r.golden_threshold = gv.threshold;
  r.golden_pass = gv.pass;
  if (!gv.pass) add_note(r, fmt::format("golden: rel-L2 {:.3e} > {}", ge.rel_l2, gv.rule));
}

// --layer-trace: the per-layer error against the golden's layers, from a separate short-lived
// path, so keeping layer outputs never touches the timed one (which is built again after).
void trace_layers(const MeasureContext& ctx, const Group& g, const PathOptions& po,
                  std::unique_ptr<StackPath>& cand, PointRow& r, PeakMemory& peak) {
  PathOptions tpo = po;
  tpo.keep_layer_outputs = true;
  cand.reset();
  {
    StackPath trace(*g.data, tpo, ctx.stream);
    trace.poison();
    trace.run();
    TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    peak.sample();
    r.layer_rel_l2 = layer_rel_l2(trace.layer_outputs_host(), g.golden_layers);
  }
  cand = std::make_unique<StackPath>(*g.data, po, ctx.stream);
}

// The candidate could not be replayed in the block just timed eagerly: no replay from now on;
// the replayed blocks before it, if any, still make the row's speedup_vs_graph_ref.
void stop_replay(PendingPoint& pp, const std::string& why) {
  pp.replay_stopped = true;
  if (pp.replay_blocks.empty()) {
    add_note(pp.row, fmt::format("no speedup_vs_graph_ref: the candidate was not replayed from a graph ({})", why));
  } else {
    add_note(pp.row, fmt::format("speedup_vs_graph_ref from {} block(s): block {} was not replayed from a graph ({})",
                                 pp.replay_blocks.size(), pp.blocks.size(), why));
  }
}

// A block's timer: block_timer_options, less what the group has already done. The baseline ran
// last in the point before (or the group's setup), so where its time is known it gets no
// warm-up run; the candidate's runs since it was built (`prior_runs`: the accuracy check's, a
// capture's) count toward its warm-up. Replayed over the H200 official sweep's rows, the
// timer's rules put these runs (one IEEE baseline forward of up to 260 ms and one candidate
// run a point) and a later block's second warm-up run at about 15 % of the fp32 groups' time.
TimerOptions block_timer(const MeasureContext& ctx, size_t block, double baseline_ms, size_t prior_runs) {
  TimerOptions t = block_timer_options(ctx.opt, block);
  t.warmup_prior_runs = prior_runs;
  if (std::isfinite(baseline_ms) && baseline_ms > 0) {
    t.warmup_ref_runs = 0;
    t.baseline_ms = baseline_ms;
  }
  return t;
}

// The baseline's median in a measurement into the group's record of it (kept where there is none).
void remember_baseline(double& known_ms, const PairedMeasurement& m) {
  if (m.pairs > 0 && std::isfinite(m.ref.median) && m.ref.median > 0) known_ms = m.ref.median;
}

// One block of a point with its candidate built: ABBA pairs against the baseline and, in a
// group whose baseline is host-bound, the candidate replayed from a graph (its own, for a
// graph configuration) against the replayed baseline, its own pairs. Two runs of case 1 on one
// H200 host moved graph candidates' eager speedups by -28 % to +35 % and their replayed ones
// by 1 % at most; two runs of cases 1 and 2 in one call moved eager candidates' eager speedups
// by up to 42 % (case 2's eager reference was 16 % slower in the second process) and an eager
// candidate against the replayed baseline by up to 33 %: only with both sides replayed is the
// host out of the ratio. `prior_runs`: the candidate's runs since it was built. Returns false
// where the run was interrupted.
bool time_block_of(const MeasureContext& ctx, Group& g, StackPath& cand, PendingPoint& pp, PeakMemory& peak,
                   size_t prior_runs) {
  StackPath& base = *g.baseline;
  const size_t block = pp.blocks.size();
  const PairedMeasurement m = time_pairs(ctx, block_timer(ctx, block, g.baseline_ms, prior_runs),
                                         [&base] { base.run(); }, [&cand] { cand.run(); });
  peak.sample();
  if (m.stop == stats::StopReason::interrupted) return false;
  remember_baseline(g.baseline_ms, m);
  pp.blocks.push_back(m);
  if (g.host_probe && g.host_probe->host_bound && !pp.replay_stopped) {
    // A candidate that cannot be replayed keeps its eager timing; its row says why it has no
    // figure against the replayed baseline.
    try {
      cand.run_replayed();  // an eager candidate's capture, outside the timing
      TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      peak.sample();
      // The capture's launch is a run of the replayed candidate.
      const PairedMeasurement mg = time_pairs(ctx, block_timer(ctx, block, g.baseline_replay_ms, 1),
                                              [&base] { base.run_replayed(); }, [&cand] { cand.run_replayed(); });
      peak.sample();
      if (mg.stop == stats::StopReason::interrupted) return false;
      remember_baseline(g.baseline_replay_ms, mg);
      pp.replay_blocks.push_back(mg);
    } catch (const DeviceError& e) {
      if (e.sticky()) throw;
      stop_replay(pp, e.what());
    } catch (const std::exception& e) {
      stop_replay(pp, e.what());
    }
  }
  return true;
}

// The ceilings of the group's dtype and math, once: from the run folder's ceilings.json where
// it holds this device's, else measured now and kept there.
void ensure_ceilings(const MeasureContext& ctx, Group& g) {
  if (g.ceilings_tried) return;
  g.ceilings_tried = true;
  try {
    std::string source;
    const MeasuredCeilings m = ceilings_for(ctx.opt.out_dir + "/ceilings.json", query_device(0), g.dtype,
                                            ctx.opt.fp32_math, ctx.stream, source);
    g.ceilings = m.ceilings;
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    g.ceilings_note = fmt::format("stage floors: ceilings not measured ({})", e.what());
  } catch (const std::exception& e) {
    // A ceilings file that cannot be read or kept (ConfigError) costs the floors, not the point.
    g.ceilings_note = fmt::format("stage floors: no ceilings ({})", e.what());
  }
}

// --stage-times: the candidate's per-stage times (events between the stages of its forward,
// without PDL, less the events' own cost: stage_timing.hpp; each stage's median) and the
// stages' floors, into the row.
void record_stage_times(const MeasureContext& ctx, Group& g, StackPath& cand, PointRow& r) {
  ensure_ceilings(ctx, g);
  StageEventRuns unused, runs;
  add_stage_event_run(cand, unused);  // a graph configuration's event graphs are captured here, untimed
  for (int i = 0; i < kStageTimeRuns; ++i) add_stage_event_run(cand, runs);
  const StageTiming timing = stage_timing(runs, static_cast<int>(g.spec.shape.layers),
                                         [&] { return probe_event_costs_ms(ctx.stream); });
  r.stage_ms.assign(timing.ms.begin(), timing.ms.end());
  r.stage_floor_ms.clear();
  if (!g.ceilings) {
    if (!g.ceilings_note.empty()) add_note(r, g.ceilings_note);
    return;
  }
  for (const StageCost& c : forward_stage_costs(g.spec.shape, g.dtype, cand.deferred_layers()))
    r.stage_floor_ms.push_back(floor_ms(c, *g.ceilings));
}

// The pooled blocks' speedup interval, widened by the spread between the blocks (the point's
// own and its group's, whichever is larger).
stats::MedianInterval blocked_interval(const PairedMeasurement& pooled, const std::vector<PairedMeasurement>& blocks,
                                       const std::vector<double>& group_sds, double level) {
  const double own = block_spread(blocks);
  return stats::widen_for_blocks(pooled.speedup, own * own, stats::pooled_block_log_var(group_sds, blocks.size()),
                                 blocks.size(), level);
}

// The group's host-bound verdict into the row and, where the point was timed against the
// replayed baseline, its speedup against that.
void record_replay(const Group& g, const PendingPoint& pp, double level, PointRow& r) {
  if (!g.host_probe) {
    if (!g.host_probe_note.empty()) add_note(r, g.host_probe_note);
    return;
  }
  const HostProbe& hp = *g.host_probe;
  r.host_bound = hp.host_bound;
  if (std::isfinite(hp.replay_ms) && hp.replay_ms > 0) r.ref_graph_ms = hp.replay_ms;
  if (pp.replay_blocks.empty()) return;
  add_note(r, fmt::format("host-bound baseline: eager {:.4f} ms, replayed {:.4f} ms ({:.2f}x)", hp.eager_ms,
                          hp.replay_ms, hp.ratio.median));
  const PairedMeasurement mg = pool_blocks(pp.replay_blocks, level);
  if (!(std::isfinite(mg.speedup.median) && mg.speedup.median > 0 && std::isfinite(mg.ref.median))) {
    add_note(r, "no usable pair against the replayed baseline: no speedup_vs_graph_ref");
    return;
  }
  const stats::MedianInterval ci = blocked_interval(mg, pp.replay_blocks, g.replay_block_sds, level);
  r.ref_graph_ms = mg.ref.median;
  r.speedup_vs_graph_ref = mg.speedup.median;
  r.speedup_vs_graph_ref_ci_low = finite_or_none(ci.lo);
  r.speedup_vs_graph_ref_ci_high = finite_or_none(ci.hi);
}

// The point's blocks, pooled, into its row.
void record_timing(const MeasureContext& ctx, const Group& g, const PendingPoint& pp, PointRow& r) {
  const double level = block_timer_options(ctx.opt, 0).confidence;
  const PairedMeasurement m = pool_blocks(pp.blocks, level);
  r.ref_ms = finite_or_none(m.ref.median);
  r.ref_spread_ms = finite_or_none(1.4826 * m.ref.mad);
  r.cand_ms = finite_or_none(m.cand.median);
  r.cand_spread_ms = finite_or_none(1.4826 * m.cand.mad);
  r.speedup = finite_or_none(m.speedup.median);
  if (!r.speedup) {
    r.status = StatusKind::error;
    add_note(r, fmt::format("no usable timed pair: {} attempted, {} left out because their SM clock "
                            "ratio strayed from the point's typical one",
                            m.pairs_attempted, m.throttled_pairs));
  }
  const stats::MedianInterval ci = blocked_interval(m, pp.blocks, g.block_sds, level);
  r.speedup_ci_low = finite_or_none(ci.lo);
  r.speedup_ci_high = finite_or_none(ci.hi);
  r.speedup_ci_level = m.speedup.confidence;
  r.blocks = static_cast<int64_t>(pp.blocks.size());
  if (pp.blocks.size() >= 2) r.block_spread = finite_or_none(block_spread(pp.blocks));
  r.reps = static_cast<int64_t>(m.pairs);
  r.reps_attempted = static_cast<int64_t>(m.pairs_attempted);
  r.warmup_runs = static_cast<int64_t>(m.warmup_runs);
  r.throttled_samples = static_cast<int64_t>(m.throttled_samples);
  r.stop_reason = std::string(stats::to_string(m.stop));
  r.min_mhz = finite_or_none(m.min_mhz);
  r.max_mhz = finite_or_none(m.max_mhz);
  const double flops = forward_flops(g.spec.shape);
  if (r.cand_ms && *r.cand_ms > 0) r.tflops = flops / (*r.cand_ms * 1e-3) / 1e12;
  if (r.ref_ms && *r.ref_ms > 0) r.ref_tflops = flops / (*r.ref_ms * 1e-3) / 1e12;
  record_replay(g, pp, level, r);
}

// One fixed configuration up to its first block (an auto point measures the configuration it
// was given). Nothing where the run was interrupted during the timing.
std::optional<PendingPoint> begin_config(const MeasureContext& ctx, Group& g, const SchedPoint& p) {
  PendingPoint pp;
  PointRow& r = pp.row;
  r = base_row(ctx, g, p);
  const StageSwitch cand_stages = ctx.techniques.stages(p.config);
  // Where the group keeps a golden output and a baseline copy, they count against the budget.
  const uint64_t kept = g.elements * (sizeof(float) + static_cast<size_t>(dtype_bytes(g.dtype)));
  const uint64_t budget = ctx.budget_bytes > kept ? ctx.budget_bytes - kept : 0;
  PathMemoryOptions mem_opt;
  mem_opt.fp32_math = ctx.opt.fp32_math;
  mem_opt.keep_layer_outputs = ctx.opt.layer_trace;
  const PointViability v = assess_point(g.spec, g.dtype, cand_stages, budget, mem_opt);
  g.baseline_choice = v.baseline;
  g.baseline_bits = bits_of(ctx.techniques, v.baseline.stages);
  r.baseline = g.baseline_bits;
  r.predicted_bytes = static_cast<int64_t>(v.peak_bytes);
  if (settle_without_running(ctx, g, v, r)) return pp;
  if (ctx.fault.matches(g.spec.id, g.dtype, r.config))
    throw DeviceError(fmt::format("injected fault at case {} {} {} (TLBENCH_INJECT_FAULT)", g.spec.id,
                                  to_string(g.dtype), r.config),
                      true);

  PeakMemory peak;
  pp.po.stages = cand_stages;
  pp.po.policy = g.spec.policy;
  pp.po.fp32_math = ctx.opt.fp32_math;
  pp.ran = true;
  std::unique_ptr<StackPath> cand = build_candidate(ctx, g, pp.po, r, peak);
  if (cand) {
    try {
      // Accuracy: one run into poisoned outputs, so an element the path never wrote is NaN.
      cand->poison();
      cand->run();
      TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      peak.sample();
      const bool tensor_core_stage = record_dispatch(ctx, *cand, g.dtype, r);
      check_accuracy(ctx, g, *cand, v.baseline.is_reference, tensor_core_stage, r);
      size_t runs_since_built = 1;  // the accuracy check's
      if (ctx.opt.layer_trace && g.golden_ok && !g.golden_layers.empty()) {
        trace_layers(ctx, g, pp.po, cand, r, peak);  // builds the candidate anew
        runs_since_built = 0;
      }
      pp.timed = true;
      if (!time_block_of(ctx, g, *cand, pp, peak, runs_since_built)) return std::nullopt;
      pp.wants_stage_times = ctx.opt.stage_times && (!ctx.stage_time_points ||
                                                     ctx.stage_time_points->matches(p.config, p.automatic,
                                                                                    ctx.techniques.size()));
    } catch (const DeviceOutOfMemory& e) {
      pp.timed = false;
      r.status = StatusKind::oom;
      add_note(r, fmt::format("out of memory while running: {}", e.what()));
    } catch (const DeviceError& e) {
      if (e.sticky()) throw;
      pp.timed = false;
      r.status = StatusKind::error;
      add_note(r, e.what());
    } catch (const std::exception& e) {
      pp.timed = false;
      r.status = StatusKind::error;
      add_note(r, e.what());
    }
  }
  pp.peak_used = peak.used;
  return pp;
}

}  // namespace

bool PendingPoint::wants_block(size_t blocks) const { return timed && !blocks_stopped && this->blocks.size() < blocks; }

std::optional<PendingPoint> begin_point(const MeasureContext& ctx, Group& g, const SchedPoint& p,
                                        const std::vector<PointRow>& rows) {
  if (!p.automatic) return begin_config(ctx, g, p);
  SchedPoint a = p;
  choose_from_rows(rows, ctx.opt.out_dir, ctx.techniques, g.spec.id, g.dtype, a);
  std::optional<PendingPoint> pp = begin_config(ctx, g, a);
  // The choice comes first in an auto row's note, whatever else the point has to say.
  if (pp) pp->row.note = a.auto_note + (pp->row.note.empty() ? "" : "; " + pp->row.note);
  return pp;
}

void time_stages(const MeasureContext& ctx, Group& g, RowAwaitingStages& held) {
  if (!held.wants_stage_times) return;
  PointRow& r = held.row;
  // A stage timing that cannot run (the path out of memory, its events graph refused) costs
  // the stage times, not the point.
  try {
    StackPath cand(*g.data, held.po, ctx.stream);
    record_stage_times(ctx, g, cand, r);
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    r.stage_ms.clear();
    r.stage_floor_ms.clear();
    add_note(r, fmt::format("stage times not measured: {}", e.what()));
  }
}

bool time_next_block(const MeasureContext& ctx, Group& g, PendingPoint& pp) {
  PeakMemory peak;
  peak.used = std::max(peak.used, pp.peak_used);
  try {
    StackPath cand(*g.data, pp.po, ctx.stream);
    peak.sample();
    if (!time_block_of(ctx, g, cand, pp, peak, 0)) return false;
  } catch (const DeviceError& e) {
    // Out of memory included: the row keeps the blocks it has, and says why it has no more.
    if (e.sticky()) throw;
    pp.blocks_stopped = true;
    add_note(pp.row, fmt::format("block {} not timed: {}", pp.blocks.size() + 1, e.what()));
  } catch (const std::exception& e) {
    pp.blocks_stopped = true;
    add_note(pp.row, fmt::format("block {} not timed: {}", pp.blocks.size() + 1, e.what()));
  }
  pp.peak_used = peak.used;
  return true;
}

void note_block_spreads(Group& g, const std::vector<PendingPoint>& points) {
  for (const PendingPoint& pp : points) {
    if (pp.blocks.size() >= 2) g.block_sds.push_back(block_spread(pp.blocks));
    if (pp.replay_blocks.size() >= 2)
      g.replay_block_sds.push_back(block_spread(pp.replay_blocks));
  }
}

RowAwaitingStages finish_point(const MeasureContext& ctx, const Group& g, PendingPoint&& pp) {
  RowAwaitingStages held{std::move(pp.row), pp.po, pp.wants_stage_times};
  PointRow& r = held.row;
  if (pp.timed && !pp.blocks.empty()) record_timing(ctx, g, pp, r);
  if (pp.ran) r.peak_bytes = static_cast<int64_t>(pp.peak_used > ctx.used_at_start ? pp.peak_used - ctx.used_at_start : 0);
  return held;
}

Group make_group(const CaseSet& cases, const SchedPoint& p, uint64_t run_seed) {
  Group g;
  g.spec = cases.cases[p.case_index];
  g.spec.seed = data_seed(g.spec, run_seed);
  g.spec.policy = layer_policy(g.spec);
  g.dtype = p.dtype;
  g.elements = static_cast<size_t>(g.spec.shape.tokens() * g.spec.shape.d_model);
  return g;
}

void ensure_golden(const MeasureContext& ctx, Group& g) {
  if (g.golden_tried) return;
  g.golden_tried = true;
  const CaseMemory cm = case_memory(g.spec.shape, g.dtype);
  if (cm.golden_peak + g.elements * sizeof(float) > ctx.budget_bytes) {
    g.golden_note = fmt::format("golden needs {} > budget {}; not computed", human_bytes(cm.golden_peak),
                                human_bytes(ctx.budget_bytes));
    return;
  }
  try {
    g.golden_out = DeviceBuffer(g.elements * sizeof(float));
    CaseData gdata(g.spec, DType::fp32, g.dtype, ctx.stream);
    PathOptions po;
    po.golden = true;
    po.fp32_math = Fp32Math::ieee;
    po.keep_layer_outputs = ctx.opt.layer_trace;
    StackPath golden(gdata, po, ctx.stream);
    golden.poison();
    const double t0 = wall_seconds();
    golden.run();
    TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    g.golden_ms = (wall_seconds() - t0) * 1e3;
    TLB_CUDA_CHECK(cudaMemcpyAsync(g.golden_out.get(), golden.output(), g.elements * sizeof(float),
                                   cudaMemcpyDeviceToDevice, ctx.stream));
    TLB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (ctx.opt.layer_trace) g.golden_layers = golden.layer_outputs_host();
    g.golden_ok = true;
    g.golden_note = fmt::format("golden computed in {:.1f} ms", g.golden_ms);
  } catch (const DeviceOutOfMemory& e) {
    g.golden_out = DeviceBuffer();
    g.golden_note = fmt::format("golden could not be allocated: {}", e.what());
  } catch (const DeviceError& e) {
    if (e.sticky()) throw;
    g.golden_out = DeviceBuffer();
    g.golden_note = fmt::format("golden failed: {}", e.what());
  }
}

}  // namespace tlb
