// The GEMM benchmarks of tlbench_kernel_bench: the layer GEMMs of the speed table with their
// fused epilogues against cuBLAS on the same product without one (`gemm`), every variant on
// the small grids of cases 1, 2 and 4 inside a CUDA graph (`small`), and each case's
// out-projection, ours against cuBLAS (`outproj`).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/core.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "common/types.hpp"
#include "gemm/gemm.hpp"

namespace tlb::bench {

// One GEMM of the speed table. bias = false drops the bias (the out-projection's is added by
// the fused add + LayerNorm); heads is for bias_qkv_split only, act for bias_activation.
struct GemmCase {
  const char* label;
  int64_t M, N, K;
  DType dt;
  GemmEpilogue epi;
  int64_t heads = 0;
  bool bias = true;
  Fp32Math math = Fp32Math::tf32;  // fp32 only
  Activation act = Activation::gelu;  // bias_activation only

  std::string dtype_name() const { return bench::dtype_name(dt, math); }
  // What --match is matched against: the label and dtype as printed.
  std::string name() const { return fmt::format("{} {}", label, dtype_name()); }
};

// What every GEMM record carries besides its numbers.
struct GemmRecordContext {
  std::FILE* jsonl = nullptr;  // kernels.jsonl records go here too, when set
  std::string gpu, cublas;
  // For bench_gemm_sustained: how long each run alone lasts, the energy meter (null: clocks
  // only) and the power limit it read.
  double sustained_s = 0.4;
  bool sustained_variants = false;  // every big-grid variant alone too (--energy-variants)
  const EnergyMeter* meter = nullptr;
  double power_limit_w = 0;
};

// The layer GEMMs of the speed table: the FFN GEMMs of cases 10, 12 and 13, the QKV projection
// (head split) of cases 8, 10, 12 and 13, the out-projection of cases 8, 10 and 13, the FFN
// GEMMs of case 8 and case 12's up projection without its GELU, in fp16 and bf16; in fp32 (TF32, and IEEE: plain fp32 FMA against cuBLAS's SGEMM) the FFN GEMMs
// of cases 10 and 13; and in TF32 every GEMM of cases 4 and 9 and case 10's QKV and
// out-projection.
std::vector<GemmCase> gemm_table();

// The persistent kernel's grid on this device (compute capability 9.0): how many CTAs of each
// schedule, and how many clusters of two, run at once.
void print_persistent_capacity();

// One GEMM: cuBLAS on the same product without epilogue, the dispatcher's pick and every other
// sm_90a variant for grids that fill the chip (the A/B behind the dispatcher's ranking), all
// taking turns. One line per GEMM, and one kernels.jsonl record with the pick as `ours` and
// each variant's TFLOP/s beside it. Returns the pick's speed against the fastest variant's.
struct GemmPickResult {
  std::string label, dtype, pick, best;
  double pick_tflops = 0, best_tflops = 0;  // best: 0 where no variant was timed beside the pick
};
GemmPickResult bench_gemm(cublasHandle_t h, cudaStream_t st, const GemmRecordContext& ctx, const GemmCase& c);

// The same GEMM as each kernel runs in a long job of its own: cuBLAS, the pick, cuBLAS again,
// each alone back to back (sustained_run), no other kernel between its calls to set the
// clock it runs at. On a card held at a limit (power, current, temperature: the records'
// clock_events say which) each kernel alone holds a clock of its own, which the turns of
// bench_gemm share out among everything that takes them: a kernel whose own clock is lower
// than cuBLAS's reads better there than it runs alone. One line,
// and one "gemm_sustained" record (ratio: ours over the mean of cuBLAS's two runs); with
// ctx.sustained_variants every big-grid variant alone after them ("variants_alone").
void bench_gemm_sustained(cublasHandle_t h, cudaStream_t st, const GemmRecordContext& ctx, const GemmCase& c);

// How well the dispatcher ranked the table: the geometric mean of each pick's speed over its
// row's fastest variant, and the rows where the pick ran more than 3 % behind it.
void print_pick_summary(const std::vector<GemmPickResult>& rows);

// The small grids of case 1, 2 and 4: how many clusters fit at once, then every variant of
// their GEMMs against cuBLAS, per launch inside a CUDA graph.
void bench_small_gemms(cublasHandle_t h, cudaStream_t st);

// The out-projection of every case in CASES (attn_out[T, d] · Wo^T, no bias: the fused add +
// LayerNorm adds it), replayed from a CUDA graph: cuBLAS's launch against the variant our
// dispatcher picks, per launch with the gaps between launches (ours overlap under PDL).
void bench_out_projections(cublasHandle_t h, cudaStream_t st, const std::string& cases_path);

}  // namespace tlb::bench
