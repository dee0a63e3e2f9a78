// Fused residual add + bias + LayerNorm in one pass per row:
//   resid_out = x + delta + bias   (when delta is given; otherwise resid = x and nothing is written)
//   norm_out  = (resid - mean) * rstd * gamma + beta, statistics in fp32.
// 16-byte vector accesses; any row length that is a multiple of 8.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/types.hpp"

namespace tlb {

// How 1/sqrt(var + eps) is computed: the hardware instruction, or the bit trick
// (seed 0x5F3759DF refined by Newton-Raphson steps).
enum class RsqrtKind : int { hardware = 0, bit_trick = 1 };

struct AddNormArgs {
  DType dtype = DType::fp16;
  int64_t rows = 0, cols = 0;
  const void* x = nullptr;      // [rows, cols]
  const void* delta = nullptr;  // [rows, cols] or null
  const void* bias = nullptr;   // [cols] or null (only with delta)
  void* resid_out = nullptr;    // [rows, cols], required with delta; may alias x
  void* norm_out = nullptr;     // [rows, cols]
  const void* gamma = nullptr;  // [cols]
  const void* beta = nullptr;   // [cols]
  float eps = 1e-5f;
  RsqrtKind rsqrt = RsqrtKind::hardware;
};

bool add_layernorm_supported(const AddNormArgs& a, std::string* why);
std::string add_layernorm(const AddNormArgs& a, cudaStream_t stream);

// The default inverse square root of the fused kernel (the faster one that passes).
RsqrtKind default_rsqrt_kind();

}  // namespace tlb
