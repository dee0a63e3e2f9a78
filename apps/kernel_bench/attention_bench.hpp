// The attention benchmarks of tlbench_kernel_bench: the fused attention alone on the speed
// table's shapes in TFLOP/s (`attn`, one JSON line per shape for scripts/attention_peer.py,
// which times the peer on the same shapes), and on every case's own shape as dispatched and with
// each grid of the sm_90a kernel forced (`attncases`).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace tlb::bench {

// The attention speed table: long sequences at head_dim 64 and 128 in both masks, case 11's
// and case 13's causal attention (few and many heads of unequal query tiles), one shape per
// further head_dim the sm_90a kernel covers, and the attention of the official cases that
// spend most in it in fp32 IEEE (plain fp32 FMA, what PyTorch runs in fp32 with TF32 off).
// With `jsonl`, one JSON line per shape.
void bench_attention_table(cudaStream_t st, std::FILE* jsonl);

// The attention of every case of CASES in FP16, as the dispatcher runs it and with each grid of
// the sm_90a TMA kernel forced (where the device runs it): the A/B behind the grid rule.
void bench_attention_cases(cudaStream_t st, const std::string& cases_path);

}  // namespace tlb::bench
