// The reference LayerNorm (docs/design.md §2, "E"): two passes over each row for the
// statistics (mean, then the biased variance around it, both in fp32), then the normalised write.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/types.hpp"

namespace tlb::reference {

// out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta over a row-major
// [rows, cols] tensor; var is the biased (1/cols) variance, as PyTorch's LayerNorm uses.
void layernorm_two_pass(DType dtype, const void* x, const void* gamma, const void* beta,
                        void* out, int64_t rows, int64_t cols, float eps, cudaStream_t stream);

}  // namespace tlb::reference
