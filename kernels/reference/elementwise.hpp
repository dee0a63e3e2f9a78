// The reference path's separate elementwise kernels (docs/design.md §2, "E"): bias add,
// residual add, activation, and the bias + head-split transpose after the three q/k/v GEMMs.
// Each is one pass over memory with fp32 arithmetic; 16-byte accesses where the shape and
// pointers allow, scalar otherwise, so any shape runs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/types.hpp"

namespace tlb::reference {

// out[r, c] = in[r, c] + bias[c] for row-major [rows, cols] tensors: `in` is a cuBLAS GEMM's
// fp32 product, out (in dtype) gets the sum rounded once. out may alias in when dtype is fp32.
void bias_add(DType dtype, void* out, const float* in, const void* bias, int64_t rows,
              int64_t cols, cudaStream_t stream);

// out = a + b over n elements; out may alias a or b.
void residual_add(DType dtype, void* out, const void* a, const void* b, int64_t n,
                  cudaStream_t stream);

// x = act(x) over n elements.
void activation_inplace(DType dtype, Activation act, void* x, int64_t n, cudaStream_t stream);

// packed is the fp32 [batch*seq, 3*d] GEMM product (q columns, then k, then v; d =
// heads*head_dim) without bias; writes q, k, v in [batch, heads, seq, head_dim] in dtype with
// bias[3*d] added before the one rounding.
void bias_split_heads(DType dtype, const float* packed, const void* bias, void* q, void* k,
                      void* v, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                      cudaStream_t stream);

}  // namespace tlb::reference
