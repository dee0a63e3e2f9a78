// tlbench_kernel_bench: the kernel-level speed floors of the hand-written kernels on the
// current GPU, each beside the ceiling it is judged against:
//   - `gemm [FILE] [--match TEXT] [--energy | --energy-variants]`: the fused-epilogue layer
//     GEMMs of cases 8, 10, 12 and 13 (FFN, QKV with head split, out-projection) vs cuBLAS on
//     the same GEMM without epilogue, every sm_90a big-grid variant beside the dispatcher's
//     pick; with FILE one kernels.jsonl record each; with --match only the GEMMs whose "label
//     dtype" (as printed, e.g. "case12 up bias+gelu fp16") contains TEXT, so that a profiler
//     sees just those; with --energy, after the table, cuBLAS, the pick and cuBLAS again run each GEMM alone (a
//     "gemm_sustained" record each): the speed and SM clock each holds in a job of its own,
//     and (through NVML) its power and what held its clock (the clock-event reasons); on a
//     card held at a limit the turns share one clock out among all who take them, so a
//     kernel that alone runs at a lower clock reads better there than it runs alone;
//     --energy-variants runs every big-grid variant alone as well;
//   - `attn [FILE]`: fused attention alone on the speed table's shapes (long sequences at
//     head_dim 64 and 128, both masks; one shape per further head_dim; the short sequences of
//     cases 4, 5 and 7, whose tiles run past seq) in TFLOP/s, and with
//     FILE one JSON line per shape for scripts/attention_peer.py;
//   - fused add+LayerNorm on case 13's rows vs the measured device copy bandwidth, for both
//     inverse-square-root variants;
//   - `small`: every GEMM variant on the small-grid shapes of cases 1 and 2, replayed from a
//     CUDA graph as the graph technique runs them (per-launch time, gaps included);
//   - `attncases [CASES]`: the attention of every case of CASES in FP16, as dispatched and with
//     each grid of the sm_90a kernel forced;
//   - `outproj [CASES]`: the out-projection of every case of CASES in FP16, our GEMM against
//     cuBLAS, replayed from a CUDA graph;
//   - `stack14 [CASES]`: case 14 of CASES (default configs/cases.json, read from the working
//     directory; 100 000 tokens) in FP16 through the layer stack alone, for the
//     configurations with attn: forward time and the device memory the configuration holds
//     (its data, workspace and cuBLAS handle) beside what the memory plan predicts;
//   - `stages [FILE] [--cases LIST] [--dtypes LIST] [--fp32-math tf32|ieee]`: per case of
//     configs/cases.json and dtype, the auto configuration built on the case's data, and each
//     stage's kernels of every layer launched alone (StackPath::run_stage_alone, behind a
//     launch hold), in turns with whole forwards: what `tlbench explain --configs auto` sets
//     its stage lines beside (scripts/explain_vs_bench.py compares their shares of the
//     forward); with FILE one JSON line per stage.
// Medians of event-timed runs after warm-up, on random (never zero) data; each GEMM takes
// turns with cuBLAS's. This file reads the command line and runs the benchmarks asked for;
// each family lives in its own file: gemm_bench.* (gemm, small, outproj), attention_bench.*
// (attn, attncases), layer_bench.* (norm, stack14, stages), and bench_common.* what they time with.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_bench.hpp"
#include "common/cuda_check.hpp"
#include "config.hpp"
#include "gemm_bench.hpp"
#include "grid.hpp"
#include "layer_bench.hpp"
#include "output_files.hpp"

namespace {

using tlb::DType;
using namespace tlb::bench;

// What to run, from the command line: the benchmark, its GEMMs (after --match), the stages
// benchmark's selection and its one positional argument (a FILE for attn, gemm and stages, a
// cases file for the others).
struct BenchArgs {
  std::string only = "all";
  const char* arg = nullptr;
  std::vector<GemmCase> gemms;
  const char* jsonl_path = nullptr;  // attn FILE, gemm FILE, stages FILE
  std::optional<StageBench> stages;
  bool energy = false;           // gemm --energy
  bool energy_variants = false;  // gemm --energy-variants (implies --energy)
};

// Bad input is one line and nothing: the caller exits 2, before any device work.
std::optional<BenchArgs> parse_args(int argc, char** argv) {
  BenchArgs a;
  if (argc > 1) a.only = argv[1];
  const char* kModes[] = {"all", "gemm", "small", "attn", "attncases", "norm", "outproj", "stack14", "stages"};
  if (std::find(std::begin(kModes), std::end(kModes), a.only) == std::end(kModes)) {
    fmt::print(stderr,
               "kernel_bench: unknown benchmark '{}' (expected all, gemm [FILE] [--match TEXT] [--energy[-variants]], small, "
               "attn [FILE], attncases [CASES], norm, outproj [CASES], stack14 [CASES], stages [FILE] [--cases "
               "LIST] [--dtypes LIST] [--fp32-math tf32|ieee])\n",
               a.only);
    return std::nullopt;
  }
  // The mode's arguments: `--match TEXT` (gemm), `--cases`, `--dtypes`, `--fp32-math`
  // (stages) and at most one positional.
  std::string match, cases_sel, dtypes_sel, fp32_math = "tf32";
  std::vector<const char*> positional;
  const std::pair<const char*, std::string*> options[] = {
      {"--match", &match}, {"--cases", &cases_sel}, {"--dtypes", &dtypes_sel}, {"--fp32-math", &fp32_math}};
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--energy") == 0 || std::strcmp(argv[i], "--energy-variants") == 0) {
      if (a.only != "gemm") {
        fmt::print(stderr, "kernel_bench: {}: only the gemm benchmark takes it\n", argv[i]);
        return std::nullopt;
      }
      a.energy = true;
      a.energy_variants = a.energy_variants || std::strcmp(argv[i], "--energy-variants") == 0;
      continue;
    }
    const auto opt = std::find_if(std::begin(options), std::end(options),
                                  [&](const auto& o) { return std::strcmp(argv[i], o.first) == 0; });
    if (opt == std::end(options)) {
      if (argv[i][0] == '-') {
        fmt::print(stderr, "kernel_bench: {}: unknown option (FILE names may not begin with -)\n", argv[i]);
        return std::nullopt;
      }
      positional.push_back(argv[i]);
      continue;
    }
    const bool ours = std::strcmp(opt->first, "--match") == 0 ? a.only == "gemm" : a.only == "stages";
    if (!ours) {
      fmt::print(stderr, "kernel_bench: {}: only the {} benchmark takes it\n", opt->first,
                 std::strcmp(opt->first, "--match") == 0 ? "gemm" : "stages");
      return std::nullopt;
    }
    if (i + 1 == argc || argv[i + 1][0] == '\0') {
      fmt::print(stderr, "kernel_bench: {}: expected a value\n", opt->first);
      return std::nullopt;
    }
    *opt->second = argv[++i];
  }
  if (positional.size() > 1) {
    fmt::print(stderr, "kernel_bench: {}: unexpected argument '{}'\n", a.only, positional[1]);
    return std::nullopt;
  }
  a.arg = positional.empty() ? nullptr : positional[0];
  if (a.only == "all" || a.only == "gemm") {
    const std::vector<GemmCase> table = gemm_table();
    std::copy_if(table.begin(), table.end(), std::back_inserter(a.gemms),
                 [&](const GemmCase& c) { return c.name().find(match) != std::string::npos; });
    if (a.gemms.empty()) {
      fmt::print(stderr, "kernel_bench: --match '{}': no GEMM of the table matches (names are \"label dtype\", "
                         "e.g. \"{}\")\n", match, table.front().name());
      return std::nullopt;
    }
  }
  if (a.only == "stages") {
    // The cases and the selection are read and checked here, before any device work.
    try {
      StageBench sb;
      sb.cases = tlb::load_cases("configs/cases.json");
      const tlb::TechniqueSet techniques = tlb::default_techniques();
      sb.sel = tlb::parse_selection(cases_sel, std::string(static_cast<size_t>(techniques.size()), '0'), dtypes_sel,
                                    sb.cases, techniques);
      if (!tlb::parse_fp32_math(fp32_math, sb.fp32_math))
        throw tlb::ConfigError(fmt::format("--fp32-math \"{}\": expected tf32 or ieee", fp32_math));
      a.stages = std::move(sb);
    } catch (const tlb::ConfigError& e) {
      fmt::print(stderr, "kernel_bench: {}\n", e.what());
      return std::nullopt;
    }
  }
  a.jsonl_path = a.only == "attn" || a.only == "gemm" || a.only == "stages" ? a.arg : nullptr;
  // FILE: a regular file or nothing yet, in a folder that exists.
  if (const std::string why = a.jsonl_path ? tlb::output_target_problem(a.jsonl_path) : ""; !why.empty()) {
    fmt::print(stderr, "kernel_bench: {}: {}\n", a.jsonl_path, why);
    return std::nullopt;
  }
  return a;
}

void run_benchmarks(const BenchArgs& a) {
  const std::string& only = a.only;
  cudaStream_t st;
  TLB_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasHandle_t h;
  TLB_CUBLAS_CHECK(cublasCreate(&h));
  TLB_CUBLAS_CHECK(cublasSetStream(h, st));
  cudaDeviceProp p{};
  TLB_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  fmt::print("device {} ({} SMs)\n", p.name, p.multiProcessorCount);
  // The JSON lines go to FILE as well (opened once the device is up, so a run that cannot
  // start leaves nothing behind).
  std::FILE* jsonl = nullptr;
  if (a.jsonl_path && !(jsonl = std::fopen(a.jsonl_path, "w")))
    throw std::runtime_error(std::string(a.jsonl_path) + ": cannot write: " + std::strerror(errno));
  if (only == "all" || only == "gemm") {
    int cublas_version = 0;
    TLB_CUBLAS_CHECK(cublasGetVersion(h, &cublas_version));
    GemmRecordContext ctx{jsonl, p.name,
                          fmt::format("{}.{}.{}", cublas_version / 10000, cublas_version / 100 % 100,
                                      cublas_version % 100)};
    if (p.major == 9) print_persistent_capacity();
    std::vector<GemmPickResult> picks;
    for (const GemmCase& c : a.gemms) picks.push_back(bench_gemm(h, st, ctx, c));
    print_pick_summary(picks);
    // After the whole table, so that its turns run as without --energy.
    if (a.energy) {
      std::string why;
      const std::optional<tlb::EnergyMeter> meter = tlb::EnergyMeter::open(0, why);
      ctx.meter = meter ? &*meter : nullptr;
      ctx.power_limit_w = meter ? meter->power_limit_w() : 0.0;
      ctx.sustained_variants = a.energy_variants;
      fmt::print("each alone for {:.1f} s (cuBLAS, ours, cuBLAS); {}\n", ctx.sustained_s,
                 meter ? fmt::format("power from NVML's energy counter, limit {:.0f} W", ctx.power_limit_w)
                       : why + ": clocks only");
      for (const GemmCase& c : a.gemms) bench_gemm_sustained(h, st, ctx, c);
    }
  }
  if (only == "small") bench_small_gemms(h, st);
  if (only == "all" || only == "attn") bench_attention_table(st, jsonl);
  if (only == "stages") bench_stages(st, *a.stages, jsonl, p.name);
  if (jsonl) std::fclose(jsonl);
  if (only == "all" || only == "norm") {
    bench_layernorm(st, 32768, 2048, DType::fp16);
    bench_layernorm(st, 32768, 2048, DType::bf16);
  }
  const char* cases = a.arg ? a.arg : "configs/cases.json";
  if (only == "outproj") bench_out_projections(h, st, cases);
  if (only == "attncases") bench_attention_cases(st, cases);
  if (only == "all" || only == "stack14") bench_stack_memory(st, cases);
  TLB_CUBLAS_CHECK(cublasDestroy(h));
  TLB_CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<BenchArgs> args = parse_args(argc, argv);
    if (!args) return 2;
    run_benchmarks(*args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kernel_bench: {}\n", e.what());
    return 3;
  }
  return 0;
}
