// Hand-written tensor-core GEMM with fused epilogues: out = epilogue(A · W^T) with A [M, K]
// row-major activations and W [N, K] row-major (PyTorch's Linear layout), fp32 accumulation.
// fp16/bf16 on mma.sync m16n8k16 (wgmma on sm_90a where available), fp32 on TF32 mma or
// plain FMA (`ieee`). Any M; N and K multiples of 8.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/fast_divisor.hpp"
#include "common/types.hpp"

namespace tlb {

enum class GemmEpilogue : int {
  bias = 0,           // out = acc + bias
  bias_activation,    // out = act(acc + bias)
  bias_residual,      // out = acc + bias + residual
  bias_qkv_split,     // acc + bias scattered to q, k, v in [batch, heads, seq, head_dim]
};

// Where the head split puts output element (m, n), worked out once per launch: divisors for
// the epilogue's index arithmetic (run-time divisions are about twenty instructions each, see
// fast_divisor.hpp) and the element strides of q, k and v [batch][head][seq][head_dim].
struct QkvSplitMap {
  FastDivisor width, head_dim, seq;  // heads * head_dim (one of q, k, v), head_dim, seq
  int64_t batch_stride = 0;          // heads * seq * head_dim
  int64_t head_stride = 0;           // seq * head_dim
};

struct GemmArgs {
  DType dtype = DType::fp16;
  Fp32Math fp32_math = Fp32Math::tf32;
  GemmEpilogue epilogue = GemmEpilogue::bias;
  Activation activation = Activation::gelu;
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;         // [M, K]
  // [N, K]: weights. Under PDL (common/launch.hpp) the GEMM starts reading W while the kernel
  // before it in the stream may still run, so that kernel must not write W.
  const void* W = nullptr;
  const void* bias = nullptr;      // [N]
  const void* residual = nullptr;  // [M, N], bias_residual only (may not alias out)
  void* out = nullptr;             // [M, N]; unused by bias_qkv_split
  // bias may be null (no bias). Every pointer must be 16-byte aligned.
  // bias_qkv_split: N == 3 * heads * head_dim, M == batch * seq.
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  // Set by the dispatcher for bias_qkv_split before each launch (callers leave it).
  QkvSplitMap split;
};

bool gemm_fused_supported(const GemmArgs& a, std::string* why);
// Launches the variant the dispatcher picks; returns its name (e.g. "sm90_wgmma_128x128x64_s4").
// Throws std::invalid_argument (with the reason) when gemm_fused_supported is false.
// TLBENCH_GEMM_VARIANT=portable|sm90 in the environment restricts the choice to the mma.sync
// kernels or to the sm_90a kernels (where those can run; otherwise the portable ones run and
// the returned name says so), for A/B measurements; unset or "auto" lets the dispatcher pick.
std::string gemm_fused(const GemmArgs& a, cudaStream_t stream);

// Every variant that can run `a` on the current device (the sm_90a ones included on an sm_90
// GPU), the dispatcher's automatic choice first; ignores TLBENCH_GEMM_VARIANT. Empty when
// gemm_fused_supported is false.
std::vector<std::string> gemm_fused_variants(const GemmArgs& a);
// Launches the named variant (one of gemm_fused_variants(a)): tests cover every tile this
// way, benchmarks compare them. Throws std::invalid_argument for a name that cannot run `a`.
void gemm_fused_variant(const GemmArgs& a, const std::string& variant, cudaStream_t stream);
// TLBENCH_GEMM_STORE as in effect, "auto" (chosen per launch), "staged", "tma" or "copy": how
// the persistent GEMM's tiles leave it (gemm_internal.hpp). Throws std::invalid_argument for
// any other value, so that a run can refuse it before it starts.
const char* gemm_store_mode();

}  // namespace tlb
