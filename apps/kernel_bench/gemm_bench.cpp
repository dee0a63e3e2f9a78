#include "gemm_bench.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "config.hpp"
#include "gemm/gemm_cublas.hpp"
#include "gemm/gemm_internal.hpp"  // tile names and cluster capacity, for the small-grid report
#include "tlbench_version.hpp"

namespace tlb::bench {
namespace {

// One GEMM's operands on the device (random, never zero), its fused-epilogue arguments and
// cuBLAS on the same product without epilogue: what both GEMM benchmarks time.
struct GemmBench {
  DType dt;
  int64_t M, N, K;
  DeviceBuffer A, W, bias, res, C;
  DeviceBuffer product;  // cuBLAS's fp32 product before the epilogue pass, where that has no place in C
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
    if (tlb::gemm_technique_needs_product(args))
      product = DeviceBuffer(static_cast<size_t>(m * n) * sizeof(float));
  }
  // One GEMM of the speed table, its bias and activation as the case says.
  explicit GemmBench(const GemmCase& c) : GemmBench(c.M, c.N, c.K, c.dt, c.epi, c.heads, c.math) {
    if (!c.bias) args.bias = nullptr;
    args.activation = c.act;
  }
  double flops() const { return 2.0 * M * N * K; }
  // Our GEMM as the dispatcher picks it; returns the pick's name.
  std::string ours(cublasHandle_t h, cudaStream_t s) const {
    return tlb::gemm_technique(h, args, static_cast<float*>(product.get()), s);
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

// The variants the dispatcher offers for a GEMM whose grid fills the chip.
std::vector<std::string> big_grid_variants(const tlb::GemmArgs& args) {
  std::vector<std::string> out;
  for (const std::string& v : tlb::gemm_fused_variants(args)) {
    if (v.rfind("sm90_pingpong", 0) == 0 || v.rfind("sm90_coop", 0) == 0 || v.rfind("sm90_wgmma_128x", 0) == 0 ||
        v.rfind("fma_128x", 0) == 0)
      out.push_back(v);
  }
  return out;
}

const char* epilogue_name(tlb::GemmEpilogue e) {
  switch (e) {
    case tlb::GemmEpilogue::bias_activation: return "bias_activation";
    case tlb::GemmEpilogue::bias_residual: return "bias_residual";
    case tlb::GemmEpilogue::bias_qkv_split: return "bias_qkv_split";
    default: return "bias";
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

}  // namespace

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
    // K = 1024 without the GELU and with the head split: whether the up projection's shortfall
    // (0.88-0.90 of cuBLAS, where K = 2048 and 4096 reach 0.99-1.04) is its epilogue's or K's.
    t.push_back({"case12 up bias only", 16384, 4096, 1024, dt, GemmEpilogue::bias});
    t.push_back({"case12 qkv head split", 16384, 3072, 1024, dt, GemmEpilogue::bias_qkv_split, 8});
    // The same product with the bias only: whether the head split's shortfall (0.90 of cuBLAS,
    // where the up projection's bias-only row at N = 4096 reaches 1.03) is its epilogue's or the
    // shape's (3072 tiles of 128 x 128, 23.3 waves, against 4096).
    t.push_back({"case12 qkv bias only", 16384, 3072, 1024, dt, GemmEpilogue::bias});
    // ReLU (one instruction an element where the GELU takes thirteen) beside both GELU rows:
    // whether the GELU's loss to its bias-only twin is its arithmetic or the activation path.
    t.push_back({"case12 up bias+relu", 16384, 4096, 1024, dt, GemmEpilogue::bias_activation, 0, true,
                 tlb::Fp32Math::tf32, tlb::Activation::relu});
    t.push_back({"case13 up bias+relu", 32768, 8192, 2048, dt, GemmEpilogue::bias_activation, 0, true,
                 tlb::Fp32Math::tf32, tlb::Activation::relu});
    // The tanh GELU (what PyTorch's fast path computes, through ex2 and a reciprocal: seven
    // instructions an element against the exact GELU's thirteen) at K = 1024, where the exact
    // one trails its bias-only twin by 12 %.
    t.push_back({"case12 up bias+gelu_tanh", 16384, 4096, 1024, dt, GemmEpilogue::bias_activation, 0, true,
                 tlb::Fp32Math::tf32, tlb::Activation::gelu_tanh});
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

void print_persistent_capacity() {
  using tlb::gemm_detail::PersistentSchedule;
  for (const PersistentSchedule s :
       {PersistentSchedule::pingpong, PersistentSchedule::pingpong_wide, PersistentSchedule::cooperative,
        PersistentSchedule::cooperative_wide}) {
    fmt::print("{}: {} CTAs at once, {} clusters of two\n",
               tlb::gemm_detail::persistent_variant_name(DType::fp16, {.schedule = s}),
               tlb::gemm_detail::persistent_capacity(s, 1), tlb::gemm_detail::persistent_capacity(s, 2));
  }
}

GemmPickResult bench_gemm(cublasHandle_t h, cudaStream_t st, const GemmRecordContext& ctx, const GemmCase& c) {
  const auto [label, M, N, K, dt, epi, heads, bias, math, act] = c;
  const std::string dtype = c.dtype_name();
  const GemmBench b(c);
  const double flops = b.flops();
  std::string pick;
  const std::vector<std::string> others = big_grid_variants(b.args);
  std::vector<Timed> fns = {[&](cudaStream_t) { b.cublas(h); }, [&](cudaStream_t s) { pick = b.ours(h, s); }};
  for (const std::string& v : others) fns.push_back([&, v](cudaStream_t s) { tlb::gemm_fused_variant(b.args, v, s); });
  const std::vector<double> ms = median_ms_each(fns, st, 40);
  const auto tflops = [&](double t) { return flops / t / 1e9; };
  const double ref = tflops(ms[0]), ours = tflops(ms[1]);
  fmt::print("gemm  {:<28} {:>9} M={:<6} N={:<6} K={:<6} ours {:7.1f} TFLOP/s ({:.3f} ms, {})  "
             "cuBLAS {:7.1f} TFLOP/s  ratio {:5.3f}\n",
             label, dtype, M, N, K, ours, ms[1], pick, ref, ours / ref);
  std::string variants;
  GemmPickResult result{label, dtype, pick, "", ours, 0.0};
  for (size_t i = 0; i < others.size(); ++i) {
    const double v = tflops(ms[2 + i]);
    fmt::print("      {:<40} {:7.1f} TFLOP/s  ratio {:5.3f}\n", others[i], v, v / ref);
    variants += fmt::format("{}\"{}\": {:.1f}", i ? ", " : "", others[i], v);
    if (v > result.best_tflops) {
      result.best = others[i];
      result.best_tflops = v;
    }
  }
  if (ctx.jsonl) {
    fmt::print(ctx.jsonl,
               "{{\"kernel\": \"gemm\", \"dtype\": \"{}\", \"m\": {}, \"n\": {}, \"k\": {}, \"epilogue\": \"{}\", {}"
               "\"bias\": {}, \"label\": \"{}\", \"ours_tflops\": {:.1f}, \"variant\": \"{}\", \"peer\": \"cublas\", "
               "\"peer_tflops\": {:.1f}, \"ratio\": {:.3f}, \"variants_tflops\": {{{}}}, \"commit\": \"{}\", "
               "\"gpu\": \"{}\", \"cublas\": \"{}\"}}\n",
               dtype, M, N, K, epilogue_name(epi),
               epi == tlb::GemmEpilogue::bias_activation ? fmt::format("\"activation\": \"{}\", ", tlb::to_string(act))
                                                         : std::string(),
               bias ? "true" : "false", label, ours, pick, ref, ours / ref, variants,
               TLBENCH_GIT_COMMIT, ctx.gpu, ctx.cublas);
    std::fflush(ctx.jsonl);
  }
  return result;
}

void bench_gemm_sustained(cublasHandle_t h, cudaStream_t st, const GemmRecordContext& ctx, const GemmCase& c) {
  const GemmBench b(c);
  const double flops = b.flops();
  std::string pick;
  const Timed cublas = [&](cudaStream_t) { b.cublas(h); };
  const Timed ours = [&](cudaStream_t s) { pick = b.ours(h, s); };
  // cuBLAS before and after ours: a drift of the card's temperature over the three runs
  // lands on cuBLAS's mean as on ours.
  const Sustained before = sustained_run(cublas, st, ctx.sustained_s, ctx.meter);
  const Sustained mine = sustained_run(ours, st, ctx.sustained_s, ctx.meter);
  const Sustained after = sustained_run(cublas, st, ctx.sustained_s, ctx.meter);
  const auto tflops = [&](const Sustained& r) { return flops / r.ms / 1e9; };
  // The clock as JSON: null where no probe read one.
  const auto json_mhz = [](const Sustained& r) {
    return std::isnan(r.sm_mhz) ? std::string("null") : fmt::format("{:.0f}", r.sm_mhz);
  };
  // The clock-event reasons as JSON ({"sw_power_cap": 0.98}: the share of the run's samples
  // each was active in; {} where none was; null without samples) and as text.
  const auto json_events = [](const Sustained& r) {
    if (r.clock_events.samples() == 0) return std::string("null");
    std::string members;
    for (const auto& [name, share] : r.clock_events.shares())
      members += fmt::format("{}\"{}\": {:.2f}", members.empty() ? "" : ", ", name, share);
    return "{" + members + "}";
  };
  const auto text_events = [](const Sustained& r) {
    std::string t;
    for (const auto& [name, share] : r.clock_events.shares())
      t += fmt::format("{}{} {:.0f} %", t.empty() ? "" : ", ", name, 100 * share);
    return r.clock_events.samples() == 0 ? std::string() : " [" + (t.empty() ? "no clock event" : t) + "]";
  };
  const double ref = (tflops(before) + tflops(after)) / 2;
  const auto text = [&](const Sustained& r) {
    return fmt::format("{:6.1f} TFLOP/s at {:4.0f} MHz", tflops(r), r.sm_mhz) +
           (r.mj >= 0 ? fmt::format(" ({:.0f} W)", r.watts) : std::string()) + text_events(r);
  };
  fmt::print("alone {:<28} {:>9} ours {} | cuBLAS {}, {} | ratio {:5.3f} ({})\n", c.label, c.dtype_name(), text(mine),
             text(before), text(after), tflops(mine) / ref, pick);
  // --energy-variants: every big-grid variant alone as well, after cuBLAS's second run.
  std::string variants;
  if (ctx.sustained_variants) {
    for (const std::string& v : big_grid_variants(b.args)) {
      const Sustained r = sustained_run([&](cudaStream_t s) { tlb::gemm_fused_variant(b.args, v, s); }, st,
                                        ctx.sustained_s, ctx.meter);
      fmt::print("      {:<44} {} | ratio {:5.3f}\n", v, text(r), tflops(r) / ref);
      variants += fmt::format("{}\"{}\": {{\"tflops\": {:.1f}, \"sm_mhz\": {}, \"clock_events\": {}}}",
                              variants.empty() ? "" : ", ", v, tflops(r), json_mhz(r), json_events(r));
    }
  }
  if (!ctx.jsonl) return;
  const auto member = [&](const Sustained& r) {
    return fmt::format("{{\"tflops\": {:.1f}, \"sm_mhz\": {}, \"mj\": {}, \"watts\": {}, \"clock_events\": {}}}",
                       tflops(r), json_mhz(r), r.mj >= 0 ? fmt::format("{:.3f}", r.mj) : "null",
                       r.watts >= 0 ? fmt::format("{:.0f}", r.watts) : "null", json_events(r));
  };
  fmt::print(ctx.jsonl,
             "{{\"kernel\": \"gemm_sustained\", \"dtype\": \"{}\", \"m\": {}, \"n\": {}, \"k\": {}, \"epilogue\": \"{}\", "
             "\"label\": \"{}\", \"variant\": \"{}\", \"seconds\": {:.2f}, \"power_limit_w\": {:.0f}, \"ours\": {}, "
             "\"cublas_before\": {}, \"cublas_after\": {}, \"ratio\": {:.3f}, {}\"commit\": \"{}\", \"gpu\": \"{}\", "
             "\"cublas\": \"{}\"}}\n",
             c.dtype_name(), c.M, c.N, c.K, epilogue_name(c.epi), c.label, pick, ctx.sustained_s, ctx.power_limit_w, member(mine),
             member(before), member(after), tflops(mine) / ref,
             variants.empty() ? std::string() : fmt::format("\"variants_alone\": {{{}}}, ", variants), TLBENCH_GIT_COMMIT,
             ctx.gpu, ctx.cublas);
  std::fflush(ctx.jsonl);
}

void print_pick_summary(const std::vector<GemmPickResult>& rows) {
  double log_sum = 0;
  int n = 0;
  std::vector<std::string> behind;
  for (const GemmPickResult& r : rows) {
    if (r.best_tflops <= 0) continue;  // nothing timed beside the pick (fp32 IEEE's FMA tiles only, say)
    // The pick is timed on its own as well as among the variants: a pick that is the best
    // variant reads a little above or below 1.
    const double share = std::min(1.0, r.pick_tflops / r.best_tflops);
    log_sum += std::log(share);
    ++n;
    if (share < 0.97) {
      behind.push_back(fmt::format("  {} {}: {} at {:.3f} of {}", r.label, r.dtype, r.pick, share, r.best));
    }
  }
  if (n == 0) return;
  fmt::print("dispatcher's picks: {:.3f} of each row's fastest variant (geometric mean of {} rows), {} rows under "
             "0.97\n",
             std::exp(log_sum / n), n, behind.size());
  for (const std::string& line : behind) fmt::print("{}\n", line);
}


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

}  // namespace tlb::bench
