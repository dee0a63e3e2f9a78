#include "layer_bench.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench_common.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "dispatch_table.hpp"
#include "layernorm/add_layernorm.hpp"
#include "plan_report.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "stack/stage_costs.hpp"
#include "text.hpp"
#include "tlbench_version.hpp"

namespace tlb::bench {

namespace {

// The stage whose output a stage reads first inside a layer: the one before it in the
// forward, CostStage's order (ln1's is the previous layer's ffn_down). Run just before it,
// that output sits in L2 as the forward leaves it.
tlb::CostStage producer_of(tlb::CostStage s) {
  return static_cast<tlb::CostStage>((static_cast<int>(s) + tlb::kNumCostStages - 1) % tlb::kNumCostStages);
}

}  // namespace

void bench_layernorm(cudaStream_t st, int64_t rows, int64_t cols, DType dt) {
  const size_t n = static_cast<size_t>(rows * cols), bytes = n * tlb::dtype_bytes(dt);
  DeviceBuffer x = random_buffer(n, dt, 1.0f, 8), delta = random_buffer(n, dt, 1.0f, 9);
  DeviceBuffer gamma = random_buffer(static_cast<size_t>(cols), dt, 1.0f, 10);
  DeviceBuffer beta = random_buffer(static_cast<size_t>(cols), dt, 0.1f, 11);
  DeviceBuffer bias = random_buffer(static_cast<size_t>(cols), dt, 0.1f, 12);
  DeviceBuffer resid(bytes), norm(bytes), copy_dst(bytes);
  const double copy_ms = median_ms([&](cudaStream_t s) {
    TLB_CUDA_CHECK(cudaMemcpyAsync(copy_dst.get(), x.get(), bytes, cudaMemcpyDeviceToDevice, s));
  }, st);
  const double copy_bw = 2.0 * bytes / copy_ms / 1e6;  // GB/s, read + write
  for (tlb::RsqrtKind kind : {tlb::RsqrtKind::hardware, tlb::RsqrtKind::bit_trick}) {
    tlb::AddNormArgs a;
    a.dtype = dt; a.rows = rows; a.cols = cols;
    a.x = x.get(); a.delta = delta.get(); a.bias = bias.get();
    a.resid_out = resid.get(); a.norm_out = norm.get();
    a.gamma = gamma.get(); a.beta = beta.get(); a.rsqrt = kind;
    std::string variant;
    const double ms = median_ms([&](cudaStream_t s) { variant = tlb::add_layernorm(a, s); }, st);
    const double bw = 4.0 * bytes / ms / 1e6;  // x, delta read; resid, norm written
    fmt::print("norm  {:>5} rows={} cols={} rsqrt={:<9} {:7.1f} GB/s ({:.4f} ms, {})  copy {:7.1f} GB/s  "
               "ratio {:5.1f}%\n",
               tlb::to_string(dt), rows, cols, kind == tlb::RsqrtKind::hardware ? "hardware" : "bit_trick",
               bw, ms, variant, copy_bw, 100.0 * bw / copy_bw);
  }
}

void bench_stack_memory(cudaStream_t st, const std::string& cases_path) {
  const tlb::CaseSet cases = tlb::load_cases(cases_path);
  const auto it = std::find_if(cases.cases.begin(), cases.cases.end(),
                               [](const tlb::CaseSpec& k) { return k.id == 14; });
  if (it == cases.cases.end()) throw std::runtime_error(cases_path + " has no case 14");
  const tlb::CaseSpec& c = *it;
  const DType dt = DType::fp16;
  TLB_CUDA_CHECK(cudaDeviceSynchronize());
  const uint64_t before = tlb::device_used_bytes();
  tlb::CaseData data(c, dt, dt, st);
  TLB_CUDA_CHECK(cudaStreamSynchronize(st));
  const uint64_t data_bytes = tlb::device_used_bytes() - before;
  fmt::print("stack case 14 {} fp16: data {:.2f} GiB on the device (planned {:.2f})\n", c.name,
             data_bytes / tlb::kBytesPerGiB, tlb::aligned_total_bytes(tlb::data_layout(c.shape, dt)) / tlb::kBytesPerGiB);
  for (const char* bits : {"01000", "01010", "11110", "11111"}) {
    tlb::PathOptions opt;
    for (int i = 0; i < tlb::kNumStages; ++i) opt.stages.on[i] = bits[i] == '1';
    uint64_t peak = tlb::device_used_bytes();
    double ms = 0.0;
    std::string variants;
    {
      tlb::StackPath path(data, opt, st);
      peak = std::max(peak, tlb::device_used_bytes());
      ms = median_ms([&](cudaStream_t) { path.run(); }, st, 3);
      peak = std::max(peak, tlb::device_used_bytes());
      for (const tlb::StageDispatch& d : path.dispatch()) {
        if (!d.wanted) continue;
        if (!variants.empty()) variants += ';';
        variants += fmt::format("{}={}", tlb::to_string(d.stage), d.variant);
      }
    }
    const uint64_t planned = tlb::path_peak_bytes(c.shape, dt, opt.stages, c.policy);  // what `plan` says
    fmt::print("stack case 14 fp16 {}: {:8.2f} ms per forward, peak device memory {:.2f} GiB "
               "(data + path; planned {:.2f} GiB) | {}\n",
               bits, ms, (peak - before) / tlb::kBytesPerGiB, planned / tlb::kBytesPerGiB, variants);
  }
}


void bench_stages(cudaStream_t st, const StageBench& sb, std::FILE* jsonl, const std::string& gpu) {
  const tlb::TechniqueSet techniques = tlb::default_techniques();
  // The selection keeps one configuration: one fixed point per (case, dtype), and the auto
  // point a case whose policy is "auto" always gets, which the loop leaves out.
  for (const tlb::GridPoint& gp : tlb::build_grid(sb.cases, techniques, sb.sel, tlb::kDefaultRunSeed)) {
    if (gp.automatic) continue;
    // As tlbench explain --configs auto builds it: the run's data seed and layer policy, the
    // built-in dispatch table's choice.
    tlb::CaseSpec spec = sb.cases.cases[gp.case_index];
    spec.seed = tlb::data_seed(spec, tlb::kDefaultRunSeed);
    spec.policy = tlb::layer_policy(spec);
    const DType dt = gp.dtype;
    const tlb::AutoConfig a = tlb::auto_config(tlb::builtin_dispatch_table(), spec, dt, sb.fp32_math, techniques);
    tlb::PathOptions po;
    po.stages = techniques.stages(a.config);
    po.policy = spec.policy;
    po.fp32_math = sb.fp32_math;
    const std::string config = "auto=" + techniques.bits(a.config);
    const std::string dtype = dtype_name(dt, sb.fp32_math);
    try {
      const tlb::CaseData data(spec, dt, dt, st);
      tlb::StackPath path(data, po, st);
      const double forward = median_ms([&](cudaStream_t) { path.run(); }, st, 5);
      const int reps = std::clamp(static_cast<int>(300.0 / std::max(forward, 1e-3)), 5, 50);
      const std::string dispatch = tlb::dispatch_text(path.dispatch());
      fmt::print("stages case {} {} {}: forward {:.4f} ms | {}\n", spec.id, dtype, config, forward, dispatch);
      for (int s = 0; s < tlb::kNumCostStages; ++s) {
        const auto cs = static_cast<tlb::CostStage>(s);
        // The stage alone in turns with whole forwards (the forward's warm-up runs first and
        // leaves the stage the buffers it reads): both medians come from the same stretch of
        // time, so the stage's share of the forward holds whatever clock the card runs at
        // then, as explain's share does. The stage runs behind a launch hold: its kernels are
        // launched one by one, where explain's events see them run inside a forward that keeps
        // the GPU busy (a replayed graph, or eager launches ahead of the GPU). Before each
        // timing its producer stage runs, untimed: inside the forward a stage finds its input
        // just written and in L2 (case 12's out-projection reads 32 MiB of attention output
        // there, and measured 6 % slower alone after a whole forward had moved on). The
        // forward is timed as explain times its own, with its launch: it is the denominator
        // of both shares.
        const MedianTimes each =
            median_ms_each({[&](cudaStream_t) { path.run(); }, [&](cudaStream_t) { path.run_stage_alone(cs); }}, st,
                           reps, {HostLaunches::timed, HostLaunches::hidden},
                           {{}, [&](cudaStream_t) { path.run_stage_alone(producer_of(cs)); }});
        const double paired_forward = each.ms[0], ms = each.ms[1];
        fmt::print("      {:<9} {:9.4f} ms ({} layers; forward in turns {:.4f} ms)\n", tlb::to_string(cs), ms,
                   spec.shape.layers, paired_forward);
        if (!jsonl) continue;
        const nlohmann::json row = {{"kernel", "stage"},
                                    {"case_id", spec.id},
                                    {"case_name", spec.name},
                                    {"dtype", dtype},
                                    {"config", config},
                                    {"stage", tlb::to_string(cs)},
                                    {"ms", ms},
                                    {"layers", spec.shape.layers},
                                    {"forward_ms", forward},
                                    {"forward_in_turns_ms", paired_forward},
                                    {"stage_launch_hold", each.held},
                                    {"after_producer", tlb::to_string(producer_of(cs))},
                                    {"reps", reps},
                                    {"dispatch", dispatch},
                                    {"commit", TLBENCH_GIT_COMMIT},
                                    {"gpu", gpu}};
        fmt::print(jsonl, "{}\n", row.dump());
      }
    } catch (const tlb::DeviceError& e) {
      // Out of memory or a capture refused: this case is not timed (the comparison names its
      // stages as without a row), the others still are.
      if (e.sticky()) throw;
      fmt::print("stages case {} {} {}: not measured: {}\n", spec.id, dtype, config, e.what());
    }
    if (jsonl) std::fflush(jsonl);
  }
}

}  // namespace tlb::bench
