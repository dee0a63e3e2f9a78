// The layer-level benchmarks of tlbench_kernel_bench: the fused add + LayerNorm against the
// device's copy bandwidth (`norm`), case 14's configurations with attn through the layer stack,
// forward time and device memory against the plan (`stack14`), and each case's auto
// configuration with every stage's kernels launched alone (`stages`), what `tlbench explain`'s
// stage lines are checked against (scripts/explain_vs_bench.py).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "config.hpp"
#include "grid.hpp"

namespace tlb::bench {

// Fused add + LayerNorm on [rows, cols] in both inverse-square-root variants, GB/s against a
// device-to-device copy of the same bytes.
void bench_layernorm(cudaStream_t st, int64_t rows, int64_t cols, DType dt);

// Case 14 of configs/cases.json in FP16, each configuration built alone on an otherwise empty
// device (the sweep's points hold a baseline stack beside the candidate, so their peaks are
// not one configuration's). Every buffer of a path is allocated at construction (a graph
// path captures there too), so the largest reading after construction and forwards is its
// peak. Seconds, not minutes: one data set, then a few forwards per configuration.
void bench_stack_memory(cudaStream_t st, const std::string& cases_path);

// The stages of the cases' auto configurations, each launched alone: the `stages` benchmark.
struct StageBench {
  tlb::CaseSet cases;
  tlb::Selection sel;  // --cases, --dtypes, and the reference alone: one point per (case, dtype)
  tlb::Fp32Math fp32_math = tlb::Fp32Math::tf32;
};
// Per selected case and dtype: the auto configuration (the built-in dispatch table's, as
// tlbench explain --configs auto takes it) on the case's data, a forward, then each stage
// alone (StackPath::run_stage_alone, behind a launch hold: the GPU's time of its kernels, not
// the host's launches of them) in turns with whole forwards (timed with their launch, as
// explain times its forward), the medians of event-timed runs; with `jsonl` one JSON line per
// stage: `ms` the stage alone, `forward_in_turns_ms` the forward timed in turns with it,
// `stage_launch_hold` whether the hold applied (not where launches synchronise), `forward_ms`
// the forward timed before the stages. A case that cannot be built (out of memory) or whose
// hold timed out is skipped with why.
void bench_stages(cudaStream_t st, const StageBench& sb, std::FILE* jsonl, const std::string& gpu);

}  // namespace tlb::bench
