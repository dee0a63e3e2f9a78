// Hand-written tensor-core GEMM with fused epilogues: out = epilogue(A · W^T) with A [M, K]
// row-major activations and W [N, K] row-major (PyTorch's Linear layout), fp32 accumulation.
// fp16/bf16 on mma.sync m16n8k16 (wgmma on sm_90a where available), fp32 on TF32 mma or
// plain FMA (`ieee`). Any M; N and K multiples of 8.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/types.hpp"

namespace tlb {

enum class GemmEpilogue : int {
  bias = 0,           // out = acc + bias
  bias_activation,    // out = act(acc + bias)
  bias_residual,      // out = acc + bias + residual
  bias_qkv_split,     // acc + bias scattered to q, k, v in [batch, heads, seq, head_dim]
};

struct GemmArgs {
  DType dtype = DType::fp16;
  Fp32Math fp32_math = Fp32Math::tf32;
  GemmEpilogue epilogue = GemmEpilogue::bias;
  Activation activation = Activation::gelu;
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;         // [M, K]
  const void* W = nullptr;         // [N, K]
  const void* bias = nullptr;      // [N]
  const void* residual = nullptr;  // [M, N], bias_residual only (may not alias out)
  void* out = nullptr;             // [M, N]; unused by bias_qkv_split
  // bias_qkv_split: N == 3 * heads * head_dim, M == batch * seq.
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
};

bool gemm_fused_supported(const GemmArgs& a, std::string* why);
// Launches the variant the dispatcher picks; returns its name (e.g. "sm90_wgmma_128x128x64_s4").
std::string gemm_fused(const GemmArgs& a, cudaStream_t stream);

}  // namespace tlb
