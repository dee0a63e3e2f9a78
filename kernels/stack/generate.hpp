// Filling a device tensor from the shared generator (common/rng.hpp), so inputs and weights
// are made where they are used and equal, bit for bit, what the CPU oracle draws.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/rng.hpp"
#include "common/types.hpp"

namespace tlb {

// dst[i] = sample_rounded(dist, i, rounding) stored as `storage` (fp16/bf16 storage needs
// rounding == storage; fp32 storage keeps any dtype's values exactly), for i < n.
void generate_tensor(void* dst, DType storage, DType rounding, const TensorDist& dist, int64_t n,
                     cudaStream_t stream);

}  // namespace tlb
