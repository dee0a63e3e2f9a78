// How the fused add + LayerNorm kernel splits a row, chosen on the host from the dtype and the
// row length; shared by the host dispatcher (add_layernorm.cpp) and the launcher (.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "layernorm/add_layernorm.hpp"

namespace tlb::detail {

// Values each thread keeps in registers at most: 4 vectors of 8 for 16-bit dtypes, 8 of 4 for
// fp32. More would cost occupancy, and occupancy is what keeps enough bytes in flight.
constexpr int kAddNormMaxValuesPerThread = 32;
// Largest row team: 512 threads leave 128 registers per thread, enough for 32 values plus
// the loads in flight without spilling.
constexpr int kAddNormMaxThreadsPerRow = 512;
// Rows per 128-thread block when a warp owns a row (no block barrier in that mode).
constexpr int kAddNormWarpRowsPerBlock = 4;

struct AddNormPlan {
  int threads_per_row = 32;   // 32 = one warp per row; more = one block per row
  int vecs_per_thread = 1;    // 16-byte vectors each thread holds (upper bound; tails masked)
};

// Smallest team that holds the row in at most kAddNormMaxValuesPerThread values per thread.
// Requires cols a multiple of 8 and <= kAddNormMaxCols.
AddNormPlan plan_add_layernorm(DType dtype, int64_t cols);

// Launches the instantiation for `plan` (implemented in add_layernorm.cu).
void launch_add_layernorm(const AddNormArgs& a, const AddNormPlan& plan, cudaStream_t stream);

}  // namespace tlb::detail
