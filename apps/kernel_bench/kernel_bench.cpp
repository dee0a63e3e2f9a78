// tlbench_kernel_bench: the kernel-level speed floors of the hand-written kernels on the
// current GPU, each beside the ceiling it is judged against:
//   - `gemm [FILE] [--match TEXT]`: the fused-epilogue layer GEMMs of cases 8, 10, 12 and 13
//     (FFN, QKV with head split, out-projection) vs cuBLAS on the same GEMM without epilogue,
//     every sm_90a big-grid variant beside the dispatcher's pick; with FILE one kernels.jsonl
//     record each; with --match only the GEMMs whose "label dtype" (as printed, e.g. "case12
//     up bias+gelu fp16") contains TEXT, so that a profiler sees just those;
//   - `attn [FILE]`: fused attention alone on the speed table's shapes (long sequences at
//     head_dim 64 and 128, both masks; one shape per further head_dim) in TFLOP/s, and with
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
//     stage's kernels of every layer launched alone after a forward (StackPath::
//     run_stage_alone): what `tlbench explain --configs auto` sets its stage lines beside
//     (scripts/explain_vs_bench.py compares them); with FILE one JSON line per stage.
// Medians of event-timed runs after warm-up, on random (never zero) data; each GEMM takes
// turns with cuBLAS's.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/attention.hpp"
#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/rounding.hpp"
#include "config.hpp"
#include "dispatch_table.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_internal.hpp"  // tile names and cluster capacity, for the small-grid report
#include "layernorm/add_layernorm.hpp"
#include "output_files.hpp"
#include "plan_report.hpp"
#include "grid.hpp"
#include "stack/layer_stack.hpp"
#include "stack/memory_plan.hpp"
#include "stack/stage_costs.hpp"
#include "text.hpp"
#include "tlbench_version.hpp"

namespace {

using tlb::DeviceBuffer;
using tlb::DType;

// Random values in [-scale, scale), rounded to the dtype, uploaded once.
DeviceBuffer random_buffer(size_t elems, DType dt, float scale, uint64_t seed) {
  const size_t esz = static_cast<size_t>(tlb::dtype_bytes(dt));
  std::vector<uint8_t> host(elems * esz);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < elems; ++i) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    const float v = scale * (static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f);
    if (dt == DType::fp32) {
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t b = dt == DType::fp16 ? tlb::f32_to_f16_bits(v) : tlb::f32_to_bf16_bits(v);
      std::memcpy(&host[i * 2], &b, 2);
    }
  }
  DeviceBuffer d(host.size());
  TLB_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return d;
}

using Timed = std::function<void(cudaStream_t)>;

// Median event-timed milliseconds of each of `fns`, after three warm-up calls of each. The
// functions take turns, in an order reversed every round (A B, B A, ...), so that clock
// ramping and the power limit's drift land on all of them alike.
std::vector<double> median_ms_each(const std::vector<Timed>& fns, cudaStream_t st, int reps) {
  for (const Timed& fn : fns)
    for (int i = 0; i < 3; ++i) fn(st);
  TLB_CUDA_CHECK(cudaStreamSynchronize(st));
  cudaEvent_t a, b;
  TLB_CUDA_CHECK(cudaEventCreate(&a));
  TLB_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < reps; ++i) {
    for (size_t j = 0; j < fns.size(); ++j) {
      const size_t f = i % 2 == 0 ? j : fns.size() - 1 - j;
      TLB_CUDA_CHECK(cudaEventRecord(a, st));
      fns[f](st);
      TLB_CUDA_CHECK(cudaEventRecord(b, st));
      TLB_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      TLB_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      t[f].push_back(ms);
    }
  }
  TLB_CUDA_CHECK(cudaEventDestroy(a));
  TLB_CUDA_CHECK(cudaEventDestroy(b));
  std::vector<double> med;
  for (std::vector<double>& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

double median_ms(const Timed& fn, cudaStream_t st, int reps = 20) { return median_ms_each({fn}, st, reps)[0]; }

// Runs fn back to back for `seconds` of wall time: a card that was idle (or busy with other
// work) reaches the clocks and temperature of sustained load before the first timing.
void warm_up(const Timed& fn, cudaStream_t st, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    for (int i = 0; i < 4; ++i) fn(st);
    TLB_CUDA_CHECK(cudaStreamSynchronize(st));
  }
}

// Microseconds per call of `fn` when `calls` of them are captured in one CUDA graph and the
// graph is replayed: what a launch costs inside a captured stack, gaps included.
double graph_us_per_call(const std::function<void(cudaStream_t)>& fn, cudaStream_t st, int calls = 20) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TLB_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) fn(st);
  TLB_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  TLB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = median_ms([&](cudaStream_t s) { TLB_CUDA_CHECK(cudaGraphLaunch(exec, s)); }, st, 30);
  TLB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TLB_CUDA_CHECK(cudaGraphDestroy(graph));
  return 1000.0 * ms / calls;
}

cudaDataType_t cuda_type(DType d) {
  return d == DType::fp16 ? CUDA_R_16F : d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

// One GEMM's operands on the device (random, never zero), its fused-epilogue arguments and
// cuBLAS on the same product without epilogue: what both GEMM benchmarks time.
struct GemmBench {
  DType dt;
  int64_t M, N, K;
  DeviceBuffer A, W, bias, res, C;
  tlb::GemmArgs args;

  // The residual is allocated for bias_residual only. `heads` (bias_qkv_split only) splits
  // N = 3 * d into heads of d / heads over one sequence of M tokens, written to C's three
  // thirds as q, k and v.
  GemmBench(int64_t m, int64_t n, int64_t k, DType d, tlb::GemmEpilogue epi, int64_t heads = 0,
            tlb::Fp32Math math = tlb::Fp32Math::tf32)
      : dt(d), M(m), N(n), K(k),
        A(random_buffer(static_cast<size_t>(m * k), d, 1.0f, 1)),
        W(random_buffer(static_cast<size_t>(n * k), d, 0.02f, 2)),
        bias(random_buffer(static_cast<size_t>(n), d, 0.1f, 3)),
        res(random_buffer(epi == tlb::GemmEpilogue::bias_residual ? static_cast<size_t>(m * n) : 1, d, 1.0f, 4)),
        C(static_cast<size_t>(m * n) * tlb::dtype_bytes(d)) {
    args.dtype = d;
    args.fp32_math = math;
    args.epilogue = epi;
    args.M = m; args.N = n; args.K = k;
    args.A = A.get(); args.W = W.get(); args.bias = bias.get(); args.residual = res.get(); args.out = C.get();
    if (epi == tlb::GemmEpilogue::bias_qkv_split) {
      const size_t third = static_cast<size_t>(m * n / 3) * tlb::dtype_bytes(d);
      args.q = C.get();
      args.k = static_cast<char*>(C.get()) + third;
      args.v = static_cast<char*>(C.get()) + 2 * third;
      args.batch = 1; args.seq = m; args.heads = heads; args.head_dim = n / 3 / heads;
    }
  }
  // fp32 in the math our kernel runs: TF32 tensor cores, or plain fp32 (cuBLAS's SGEMM path,
  // as PyTorch runs it with TF32 off).
  void cublas(cublasHandle_t h) const {
    const float one = 1.0f, zero = 0.0f;
    const bool tf32 = dt == DType::fp32 && args.fp32_math == tlb::Fp32Math::tf32;
    TLB_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                  static_cast<int>(K), &one, W.get(), cuda_type(dt), static_cast<int>(K),
                                  A.get(), cuda_type(dt), static_cast<int>(K), &zero, C.get(),
                                  cuda_type(dt), static_cast<int>(N),
                                  tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  }
};

const char* epilogue_name(tlb::GemmEpilogue e) {
  switch (e) {
    case tlb::GemmEpilogue::bias_activation: return "bias_activation";
    case tlb::GemmEpilogue::bias_residual: return "bias_residual";
    case tlb::GemmEpilogue::bias_qkv_split: return "bias_qkv_split";
    default: return "bias";
  }
}

// What every GEMM record carries besides its numbers.
struct GemmRecordContext {
  std::FILE* jsonl = nullptr;  // kernels.jsonl records go here too, when set
  std::string gpu, cublas;
};

// One GEMM of the speed table. bias = false drops the bias (the out-projection's is added by
// the fused add + LayerNorm); heads is for bias_qkv_split only.
// A dtype as the tables print it: fp32 with its math ("fp32-tf32", "fp32-ieee").
std::string dtype_name(DType dt, tlb::Fp32Math math) {
  return dt == DType::fp32 ? fmt::format("fp32-{}", tlb::to_string(math)) : std::string(tlb::to_string(dt));
}

struct GemmCase {
  const char* label;
  int64_t M, N, K;
  DType dt;
  tlb::GemmEpilogue epi;
  int64_t heads = 0;
  bool bias = true;
  tlb::Fp32Math math = tlb::Fp32Math::tf32;  // fp32 only

  std::string dtype_name() const { return ::dtype_name(dt, math); }
  // What --match is matched against: the label and dtype as printed.
  std::string name() const { return fmt::format("{} {}", label, dtype_name()); }
};

// The layer GEMMs of the speed table: the FFN GEMMs of cases 10, 12 and 13, the QKV projection
// (head split) and out-projection of cases 8, 10 and 13 and the FFN GEMMs of case 8, in fp16
// and bf16; in fp32 (TF32, and IEEE: plain fp32 FMA against cuBLAS's SGEMM) the FFN GEMMs
// of cases 10 and 13; and in TF32 every GEMM of cases 4 and 9 and case 10's QKV and
// out-projection.
std::vector<GemmCase> gemm_table() {
  using tlb::GemmEpilogue;
  std::vector<GemmCase> t;
  for (DType dt : {DType::fp16, DType::bf16}) {
    t.push_back({"case10 up bias+gelu", 4096, 16384, 4096, dt, GemmEpilogue::bias_activation});
    t.push_back({"case10 down bias+residual", 4096, 4096, 16384, dt, GemmEpilogue::bias_residual});
    t.push_back({"case13 up bias+gelu", 32768, 8192, 2048, dt, GemmEpilogue::bias_activation});
    t.push_back({"case13 up bias only", 32768, 8192, 2048, dt, GemmEpilogue::bias});
    t.push_back({"case13 down bias+residual", 32768, 2048, 8192, dt, GemmEpilogue::bias_residual});
    t.push_back({"case12 up bias+gelu", 16384, 4096, 1024, dt, GemmEpilogue::bias_activation});
    t.push_back({"case12 down bias+residual", 16384, 1024, 4096, dt, GemmEpilogue::bias_residual});
    t.push_back({"case8 up bias+gelu", 8192, 8192, 2048, dt, GemmEpilogue::bias_activation});
    t.push_back({"case8 down bias+residual", 8192, 2048, 8192, dt, GemmEpilogue::bias_residual});
    t.push_back({"case8 qkv head split", 8192, 6144, 2048, dt, GemmEpilogue::bias_qkv_split, 16});
    t.push_back({"case10 qkv head split", 4096, 12288, 4096, dt, GemmEpilogue::bias_qkv_split, 32});
    t.push_back({"case13 qkv head split", 32768, 6144, 2048, dt, GemmEpilogue::bias_qkv_split, 16});
    t.push_back({"case8 out-projection", 8192, 2048, 2048, dt, GemmEpilogue::bias, 0, false});
    t.push_back({"case10 out-projection", 4096, 4096, 4096, dt, GemmEpilogue::bias, 0, false});
    t.push_back({"case13 out-projection", 32768, 2048, 2048, dt, GemmEpilogue::bias, 0, false});
  }
  for (tlb::Fp32Math math : {tlb::Fp32Math::tf32, tlb::Fp32Math::ieee}) {
    t.push_back({"case10 up bias+gelu", 4096, 16384, 4096, DType::fp32, GemmEpilogue::bias_activation, 0, true, math});
    t.push_back({"case10 down bias+residual", 4096, 4096, 16384, DType::fp32, GemmEpilogue::bias_residual, 0, true,
                 math});
    t.push_back({"case13 up bias+gelu", 32768, 8192, 2048, DType::fp32, GemmEpilogue::bias_activation, 0, true, math});
    t.push_back({"case13 down bias+residual", 32768, 2048, 8192, DType::fp32, GemmEpilogue::bias_residual, 0, true,
                 math});
  }
  // TF32 where PyTorch's TF32 layer led `auto` in the d258325 sweep (cases 4, 9 and 10): every
  // GEMM of the layer that the table does not hold yet.
  const auto tf32 = [&](const char* label, int64_t M, int64_t N, int64_t K, GemmEpilogue epi, int64_t heads = 0,
                        bool bias = true) {
    t.push_back({label, M, N, K, DType::fp32, epi, heads, bias, tlb::Fp32Math::tf32});
  };
  tf32("case4 qkv head split", 4096, 3072, 1024, GemmEpilogue::bias_qkv_split, 16);
  tf32("case4 out-projection", 4096, 1024, 1024, GemmEpilogue::bias, 0, false);
  tf32("case4 up bias+gelu", 4096, 4096, 1024, GemmEpilogue::bias_activation);
  tf32("case4 down bias+residual", 4096, 1024, 4096, GemmEpilogue::bias_residual);
  tf32("case9 qkv head split", 8192, 4800, 1600, GemmEpilogue::bias_qkv_split, 25);
  tf32("case9 out-projection", 8192, 1600, 1600, GemmEpilogue::bias, 0, false);
  tf32("case9 up bias+gelu", 8192, 6400, 1600, GemmEpilogue::bias_activation);
  tf32("case9 down bias+residual", 8192, 1600, 6400, GemmEpilogue::bias_residual);
  tf32("case10 qkv head split", 4096, 12288, 4096, GemmEpilogue::bias_qkv_split, 32);
  tf32("case10 out-projection", 4096, 4096, 4096, GemmEpilogue::bias, 0, false);
  return t;
}

// One GEMM: cuBLAS on the same product without epilogue, the dispatcher's pick and every other
// sm_90a variant for grids that fill the chip (the A/B behind the dispatcher's ranking), all
// taking turns. One line per GEMM, and one kernels.jsonl record with the pick as `ours` and
// each variant's TFLOP/s beside it.
void bench_gemm(cublasHandle_t h, cudaStream_t st, const GemmRecordContext& ctx, const GemmCase& c) {
  const auto [label, M, N, K, dt, epi, heads, bias, math] = c;
  const std::string dtype = c.dtype_name();
  GemmBench b(M, N, K, dt, epi, heads, math);
  if (!bias) b.args.bias = nullptr;
  const double flops = 2.0 * M * N * K;
  std::string pick;
  std::vector<std::string> others;
  for (const std::string& v : tlb::gemm_fused_variants(b.args)) {
    const bool big_grid_variant = v.rfind("sm90_pingpong", 0) == 0 || v.rfind("sm90_coop", 0) == 0 ||
                                  v.rfind("sm90_wgmma_128x", 0) == 0 ||
                                  v.rfind("fma_128x", 0) == 0;
    if (big_grid_variant) others.push_back(v);
  }
  std::vector<Timed> fns = {[&](cudaStream_t) { b.cublas(h); },
                            [&](cudaStream_t s) { pick = tlb::gemm_fused(b.args, s); }};
  for (const std::string& v : others) fns.push_back([&, v](cudaStream_t s) { tlb::gemm_fused_variant(b.args, v, s); });
  const std::vector<double> ms = median_ms_each(fns, st, 40);
  const auto tflops = [&](double t) { return flops / t / 1e9; };
  const double ref = tflops(ms[0]), ours = tflops(ms[1]);
  fmt::print("gemm  {:<28} {:>9} M={:<6} N={:<6} K={:<6} ours {:7.1f} TFLOP/s ({:.3f} ms, {})  "
             "cuBLAS {:7.1f} TFLOP/s  ratio {:5.3f}\n",
             label, dtype, M, N, K, ours, ms[1], pick, ref, ours / ref);
  std::string variants;
  for (size_t i = 0; i < others.size(); ++i) {
    fmt::print("      {:<40} {:7.1f} TFLOP/s  ratio {:5.3f}\n", others[i], tflops(ms[2 + i]), tflops(ms[2 + i]) / ref);
    variants += fmt::format("{}\"{}\": {:.1f}", i ? ", " : "", others[i], tflops(ms[2 + i]));
  }
  if (ctx.jsonl) {
    fmt::print(ctx.jsonl,
               "{{\"kernel\": \"gemm\", \"dtype\": \"{}\", \"m\": {}, \"n\": {}, \"k\": {}, \"epilogue\": \"{}\", "
               "\"bias\": {}, \"label\": \"{}\", \"ours_tflops\": {:.1f}, \"variant\": \"{}\", \"peer\": \"cublas\", "
               "\"peer_tflops\": {:.1f}, \"ratio\": {:.3f}, \"variants_tflops\": {{{}}}, \"commit\": \"{}\", "
               "\"gpu\": \"{}\", \"cublas\": \"{}\"}}\n",
               dtype, M, N, K, epilogue_name(epi), bias ? "true" : "false", label, ours, pick, ref, ours / ref, variants,
               TLBENCH_GIT_COMMIT, ctx.gpu, ctx.cublas);
    std::fflush(ctx.jsonl);
  }
}

// Every variant the dispatcher offers for one GEMM, the dispatcher's pick marked, beside
// cuBLAS on the same product without epilogue.
void bench_gemm_small(cublasHandle_t h, cudaStream_t st, const char* label, int64_t M, int64_t N, int64_t K,
                      DType dt, tlb::GemmEpilogue epi) {
  const GemmBench b(M, N, K, dt, epi);
  const double cublas_us = graph_us_per_call([&](cudaStream_t) { b.cublas(h); }, st);
  const std::string chosen = tlb::gemm_fused(b.args, st);
  fmt::print("small {:<22} {:>5} M={:<5} N={:<5} K={:<5} cuBLAS {:6.2f} us/launch (graph)\n", label,
             tlb::to_string(dt), M, N, K, cublas_us);
  for (const std::string& v : tlb::gemm_fused_variants(b.args)) {
    const double us = graph_us_per_call([&](cudaStream_t s) { tlb::gemm_fused_variant(b.args, v, s); }, st);
    fmt::print("      {:<40} {:6.2f} us  {:5.2f}x cuBLAS{}\n", v, us, cublas_us / us, v == chosen ? "  <- dispatch" : "");
  }
}

// The out-projection of every case in CASES (attn_out[T, d] · Wo^T, no bias: the fused add +
// LayerNorm adds it), replayed from a CUDA graph: cuBLAS's launch against the variant our
// dispatcher picks, per launch with the gaps between launches (ours overlap under PDL).
void bench_out_projections(cublasHandle_t h, cudaStream_t st, const std::string& cases_path) {
  const tlb::CaseSet cases = tlb::load_cases(cases_path);
  for (const tlb::CaseSpec& c : cases.cases) {
    const int64_t T = c.shape.tokens(), d = c.shape.d_model;
    GemmBench b(T, d, d, DType::fp16, tlb::GemmEpilogue::bias);
    b.args.bias = nullptr;
    const double cublas_us = graph_us_per_call([&](cudaStream_t) { b.cublas(h); }, st);
    std::string chosen;
    const double ours_us = graph_us_per_call([&](cudaStream_t s) { chosen = tlb::gemm_fused(b.args, s); }, st);
    fmt::print("outproj case {:>2} fp16 M={:<6} N=K={:<5} cuBLAS {:8.2f} us  ours {:8.2f} us ({:5.2f}x, {})\n", c.id, T,
               d, cublas_us, ours_us, cublas_us / ours_us, chosen);
  }
}

// One attention shape of the speed table: forward TFLOP/s (4 b h s^2 d, halved under the causal
// mask) of the variant the dispatcher picks, or of `force`. With `jsonl`, also one JSON line
// per shape for scripts/attention_peer.py, which times the peer library on the same shape and
// completes the kernels.jsonl record.
void bench_attention(cudaStream_t st, DType dt, tlb::Fp32Math math, tlb::MaskKind mask, int64_t b, int64_t h, int64_t s, int64_t dh,
                     std::FILE* jsonl, const char* force = nullptr, const std::vector<int>& valid_lens = {},
                     double warm_s = 0) {
  const size_t n = static_cast<size_t>(b * h * s * dh);
  DeviceBuffer q = random_buffer(n, dt, 1.0f, 5), k = random_buffer(n, dt, 1.0f, 6),
               v = random_buffer(n, dt, 1.0f, 7);
  DeviceBuffer o(n * tlb::dtype_bytes(dt));
  tlb::AttentionArgs a;
  a.dtype = dt; a.fp32_math = math; a.batch = b; a.heads = h; a.seq = s; a.head_dim = dh; a.mask = mask;
  a.q = q.get(); a.k = k.get(); a.v = v.get(); a.o = o.get();
  a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
  a.force = force;
  DeviceBuffer lens(std::max<size_t>(1, valid_lens.size()) * sizeof(int));
  if (mask == tlb::MaskKind::padding) {
    if (valid_lens.size() != static_cast<size_t>(b)) throw std::invalid_argument("padding needs one valid length per batch element");
    TLB_CUDA_CHECK(cudaMemcpy(lens.get(), valid_lens.data(), valid_lens.size() * sizeof(int), cudaMemcpyHostToDevice));
    a.valid_lens = lens.as<int>();
  }
  DeviceBuffer ws(std::max<uint64_t>(1, tlb::flash_attention_workspace_bytes(a)));
  a.workspace = ws.get();
  std::string variant;
  const Timed run = [&](cudaStream_t st2) { variant = tlb::flash_attention(a, st2); };
  warm_up(run, st, warm_s);
  const double ms = median_ms(run, st, 20);
  double flops = 4.0 * b * h * s * s * dh;
  if (mask == tlb::MaskKind::causal) flops *= 0.5;
  const double tflops = flops / ms / 1e9;
  const std::string dtype = dtype_name(dt, math);
  fmt::print("attn  {:>9} b={} h={} s={} dh={} {:<7} {:7.1f} TFLOP/s ({:.3f} ms, {})\n", dtype, b, h, s, dh,
             tlb::to_string(mask), tflops, ms, variant);
  if (jsonl) {
    fmt::print(jsonl,
               "{{\"kernel\": \"attention\", \"dtype\": \"{}\", \"batch\": {}, \"heads\": {}, \"seq\": {}, "
               "\"head_dim\": {}, \"causal\": {}, \"ours_tflops\": {:.1f}, \"ours_ms\": {:.4f}, \"variant\": \"{}\", "
               "\"commit\": \"{}\"}}\n",
               dtype, b, h, s, dh, mask == tlb::MaskKind::causal ? "true" : "false", tflops, ms, variant,
               TLBENCH_GIT_COMMIT);
    std::fflush(jsonl);
  }
}

// The attention of every case of CASES in FP16, as the dispatcher runs it and with each grid of
// the sm_90a TMA kernel forced (where the device runs it): the A/B behind the grid rule.
void bench_attention_cases(cudaStream_t st, const std::string& cases_path) {
  const tlb::CaseSet cases = tlb::load_cases(cases_path);
  for (const tlb::CaseSpec& c : cases.cases) {
    const tlb::LayerShape& s = c.shape;
    std::string why;
    if (!tlb::flash_attention_supported(s, DType::fp16, &why)) {
      fmt::print("attn  case {:>2}: not run: {}\n", c.id, why);
      continue;
    }
    fmt::print("attn  case {:>2} {}\n", c.id, c.name);
    for (const char* force : {static_cast<const char*>(nullptr), "tma,tiles", "tma,persistent"}) {
      if (force && !tlb::flash_attention_has_sm90a()) continue;
      bench_attention(st, DType::fp16, tlb::Fp32Math::tf32, s.mask, s.batch, s.heads, s.seq, s.head_dim(), nullptr, force, s.valid_lens);
    }
  }
}

// The attention speed table: long sequences at head_dim 64 and 128 in both masks, case 11's
// and case 13's causal attention (few and many heads of unequal query tiles), one shape per
// further head_dim the sm_90a kernel covers, and the attention of the official cases that
// spend most in it in fp32 IEEE (plain fp32 FMA, what PyTorch runs in fp32 with TF32 off).
void bench_attention_table(cudaStream_t st, std::FILE* jsonl) {
  using tlb::MaskKind;
  struct Row {
    DType dt;
    int64_t b, h, s, d;
    MaskKind mask;
    tlb::Fp32Math math = tlb::Fp32Math::tf32;  // fp32 only
  };
  constexpr tlb::Fp32Math kIeee = tlb::Fp32Math::ieee;
  const Row rows[] = {
      {DType::fp16, 1, 16, 16384, 128, MaskKind::none}, {DType::fp16, 1, 16, 16384, 128, MaskKind::causal},
      {DType::bf16, 1, 16, 16384, 128, MaskKind::none}, {DType::bf16, 1, 16, 16384, 128, MaskKind::causal},
      {DType::fp16, 1, 16, 100000, 64, MaskKind::causal}, {DType::fp16, 8, 16, 4096, 128, MaskKind::causal},
      {DType::fp16, 1, 16, 8192, 128, MaskKind::causal},
      {DType::fp16, 1, 16, 16384, 64, MaskKind::none},  {DType::fp16, 1, 16, 16384, 64, MaskKind::causal},
      {DType::fp16, 1, 16, 8192, 32, MaskKind::none},   {DType::fp16, 1, 16, 8192, 80, MaskKind::none},
      {DType::fp16, 1, 16, 8192, 96, MaskKind::none},   {DType::fp16, 1, 16, 8192, 192, MaskKind::none},
      {DType::fp16, 1, 16, 8192, 256, MaskKind::none},
      {DType::fp32, 1, 8, 16384, 128, MaskKind::none, kIeee},  {DType::fp32, 1, 16, 8192, 128, MaskKind::causal, kIeee},
      {DType::fp32, 1, 16, 16384, 64, MaskKind::causal, kIeee}, {DType::fp32, 4, 20, 1500, 64, MaskKind::none, kIeee},
      {DType::fp32, 32, 16, 257, 64, MaskKind::none, kIeee},
  };
  bool first = true;
  for (const Row& r : rows) {
    std::string why;
    tlb::LayerShape shape;
    shape.batch = r.b; shape.seq = r.s; shape.heads = r.h; shape.d_model = r.h * r.d; shape.mask = r.mask;
    if (!tlb::flash_attention_supported(shape, r.dt, &why)) {
      fmt::print("attn  {:>9} b={} h={} s={} dh={} {:<7} not run: {}\n", dtype_name(r.dt, r.math), r.b, r.h, r.s, r.d,
                 tlb::to_string(r.mask), why);
      continue;
    }
    bench_attention(st, r.dt, r.math, r.mask, r.b, r.h, r.s, r.d, jsonl, nullptr, {}, first ? 1.0 : 0.0);
    first = false;
  }
}

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

// Case 14 of configs/cases.json in FP16, each configuration built alone on an otherwise empty
// device (the sweep's points hold a baseline stack beside the candidate, so their peaks are
// not one configuration's). Every buffer of a path is allocated at construction (a graph
// path captures there too), so the largest reading after construction and forwards is its
// peak. Seconds, not minutes: one data set, then a few forwards per configuration.
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

// The stages of the cases' auto configurations, each launched alone: the `stages` benchmark.
struct StageBench {
  tlb::CaseSet cases;
  tlb::Selection sel;  // --cases, --dtypes
  tlb::Fp32Math fp32_math = tlb::Fp32Math::tf32;
};

void bench_stages(cudaStream_t st, const StageBench& sb, std::FILE* jsonl, const std::string& gpu) {
  const tlb::TechniqueSet techniques = tlb::default_techniques();
  for (const tlb::GridPoint& gp : tlb::build_grid(sb.cases, techniques, sb.sel, tlb::kDefaultRunSeed)) {
    if (gp.config != 0 || gp.automatic) continue;  // one pass per (case, dtype): its first configuration
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
        path.run();  // the buffers the stage reads, as a forward leaves them
        const double ms = median_ms([&](cudaStream_t) { path.run_stage_alone(cs); }, st, reps);
        fmt::print("      {:<9} {:9.4f} ms ({} layers)\n", tlb::to_string(cs), ms, spec.shape.layers);
        if (!jsonl) continue;
        const nlohmann::json row = {{"kernel", "stage"}, {"case_id", spec.id},       {"case_name", spec.name},
                                    {"dtype", dtype},    {"config", config},         {"stage", tlb::to_string(cs)},
                                    {"ms", ms},          {"layers", spec.shape.layers}, {"forward_ms", forward},
                                    {"reps", reps},      {"dispatch", dispatch},     {"commit", TLBENCH_GIT_COMMIT},
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

// What to run, from the command line: the benchmark, its GEMMs (after --match), the stages
// benchmark's selection and its one positional argument (a FILE for attn, gemm and stages, a
// cases file for the others).
struct BenchArgs {
  std::string only = "all";
  const char* arg = nullptr;
  std::vector<GemmCase> gemms;
  const char* jsonl_path = nullptr;  // attn FILE, gemm FILE, stages FILE
  std::optional<StageBench> stages;
};

// Bad input is one line and nothing: the caller exits 2, before any device work.
std::optional<BenchArgs> parse_args(int argc, char** argv) {
  BenchArgs a;
  if (argc > 1) a.only = argv[1];
  const char* kModes[] = {"all", "gemm", "small", "attn", "attncases", "norm", "outproj", "stack14", "stages"};
  if (std::find(std::begin(kModes), std::end(kModes), a.only) == std::end(kModes)) {
    fmt::print(stderr,
               "kernel_bench: unknown benchmark '{}' (expected all, gemm [FILE] [--match TEXT], small, "
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
      sb.sel = tlb::parse_selection(cases_sel, "", dtypes_sel, sb.cases, tlb::default_techniques());
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

// The small grids of case 1, 2 and 4: how many clusters fit at once, then the GEMMs.
void bench_small_gemms(cublasHandle_t h, cudaStream_t st) {
  using tlb::GemmEpilogue;
  using tlb::gemm_detail::WgmmaTile;
  for (WgmmaTile t : {WgmmaTile::m64n128, WgmmaTile::m64n64}) {
    for (int split = 1; split <= tlb::gemm_detail::kMaxWgmmaSplit; split *= 2) {
      fmt::print("clusters of {} x {} at once: {}\n", split, tlb::gemm_detail::wgmma_tile_name(t, DType::fp16, 1),
                 tlb::gemm_detail::wgmma_max_active_clusters(t, DType::fp16, split));
    }
  }
  bench_gemm_small(h, st, "case1 up bias only", 128, 2048, 512, DType::fp16, GemmEpilogue::bias);
  for (DType dt : {DType::fp16, DType::fp32}) {
    bench_gemm_small(h, st, "case1 qkv", 128, 1536, 512, dt, GemmEpilogue::bias);
    bench_gemm_small(h, st, "case1 up bias+gelu", 128, 2048, 512, dt, GemmEpilogue::bias_activation);
    bench_gemm_small(h, st, "case1 down bias+residual", 128, 512, 2048, dt, GemmEpilogue::bias_residual);
  }
  bench_gemm_small(h, st, "case2 down bias+residual", 1024, 768, 3072, DType::fp16, GemmEpilogue::bias_residual);
  bench_gemm_small(h, st, "case2 qkv", 1024, 2304, 768, DType::fp16, GemmEpilogue::bias);
  bench_gemm_small(h, st, "case4 down bias+residual", 4096, 1024, 4096, DType::fp16, GemmEpilogue::bias_residual);
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
    const GemmRecordContext ctx{jsonl, p.name,
                                fmt::format("{}.{}.{}", cublas_version / 10000, cublas_version / 100 % 100,
                                            cublas_version % 100)};
    for (const GemmCase& c : a.gemms) bench_gemm(h, st, ctx, c);
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
